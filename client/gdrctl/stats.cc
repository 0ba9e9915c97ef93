#include "client/gdrctl/stats.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/gdrctl/message_json.h"
#include "common/wire/transport_kind.h"
#include "common/base/units.h"
#include "gdrstore/client.h"

namespace gdrctl {

namespace v1 = gdrstore::v1;

namespace {

std::string Bytes(double b) {
  if (b >= 1e9) return absl::StrFormat("%.2f GB", b / 1e9);
  if (b >= 1e6) return absl::StrFormat("%.1f MB", b / 1e6);
  if (b >= 1e3) return absl::StrFormat("%.1f kB", b / 1e3);
  return absl::StrFormat("%.0f B", b);
}

// The volume's device model in effect and what it did, one line ("no media timing" when off).
std::string MediaLine(const v1::MediaTiming& m) {
  std::vector<std::string> parts;
  if (!m.preset().empty()) parts.push_back(m.preset());
  if (m.latency_us() != 0) {
    parts.push_back(m.p99_us() != 0 ? absl::StrCat("latency p50 ", m.latency_us(), " us p99 ",
                                                   m.p99_us(), " us")
                                    : absl::StrCat("latency ", m.latency_us(), " us"));
  }
  auto rate = [&](const char* what, uint64_t bytes_per_sec) {
    if (bytes_per_sec != 0) {
      parts.push_back(absl::StrCat(what, Bytes(static_cast<double>(bytes_per_sec)), "/s"));
    }
  };
  rate("bandwidth ", m.bandwidth_bytes_per_sec());
  rate("read ", m.read_bandwidth_bytes_per_sec());
  rate("write ", m.write_bandwidth_bytes_per_sec());
  if (m.iops() != 0) parts.push_back(absl::StrCat(m.iops(), " IOPS"));
  if (m.read_iops() != 0) parts.push_back(absl::StrCat(m.read_iops(), " read IOPS"));
  if (m.write_iops() != 0) parts.push_back(absl::StrCat(m.write_iops(), " write IOPS"));
  if (m.queue_depth() != 0) {
    parts.push_back(absl::StrCat("qd ", m.in_device(), "/", m.queue_depth()));
  }
  if (parts.empty()) return "no media timing";
  std::string line = absl::StrCat("media ", absl::StrJoin(parts, ", "));
  if (m.queued_ops() != 0) {
    absl::StrAppendFormat(&line, "; %u of %u ops waited, %.1f ms on average", m.queued_ops(),
                          m.ops(), m.queue_wait_us() / 1e3 / m.queued_ops());
  }
  return line;
}

std::string Errors(const v1::OpCounters& c) {
  if (c.errors_size() == 0) return "none";
  std::string out;
  for (const auto& e : c.errors()) absl::StrAppend(&out, out.empty() ? "" : " ", e.name(), "=", e.count());
  return out;
}

std::string Latency(const v1::LatencySummary& l) {
  if (l.count() == 0) return "-";
  return absl::StrFormat("p50 %.0f p90 %.0f p99 %.0f p99.9 %.0f max %.0f", l.p50_us(), l.p90_us(),
                         l.p99_us(), l.p999_us(), l.max_us());
}

// Counter lines of one scope, with rates when a previous sample of the same scope is given.
void AppendScope(std::string* out, const std::string& title, const v1::OpCounters& c,
                 const v1::OpCounters* prev, double secs, const std::string& extra) {
  absl::StrAppendFormat(out, "%s%s\n", title, extra.empty() ? "" : absl::StrCat("  (", extra, ")"));
  absl::StrAppendFormat(out, "    write (store->client)  %10u ops %12s", c.write_ops(),
                        Bytes(static_cast<double>(c.write_bytes())));
  if (prev != nullptr && secs > 0) {
    absl::StrAppendFormat(out, "   %8.0f ops/s %10s/s",
                          (c.write_ops() - prev->write_ops()) / secs,
                          Bytes((c.write_bytes() - prev->write_bytes()) / secs));
  }
  absl::StrAppendFormat(out, "\n    read  (client->store)  %10u ops %12s", c.read_ops(),
                        Bytes(static_cast<double>(c.read_bytes())));
  if (prev != nullptr && secs > 0) {
    absl::StrAppendFormat(out, "   %8.0f ops/s %10s/s", (c.read_ops() - prev->read_ops()) / secs,
                          Bytes((c.read_bytes() - prev->read_bytes()) / secs));
  }
  absl::StrAppendFormat(out, "\n    in flight %d ops, %s; errors: %s\n", c.inflight_ops(),
                        Bytes(static_cast<double>(c.inflight_bytes())), Errors(c));
  absl::StrAppendFormat(out, "    latency us  write: %s\n", Latency(c.write_latency()));
  absl::StrAppendFormat(out, "                read:  %s\n", Latency(c.read_latency()));
}

}  // namespace

std::string FormatStats(const v1::GetStatsResponse& now, const v1::GetStatsResponse* previous,
                        absl::Duration elapsed) {
  const double secs = absl::ToDoubleSeconds(elapsed);
  std::string out;
  const auto& a = now.admission();
  absl::StrAppendFormat(&out, "gdrstored %s, up %.1f s, %u reloads\n", now.version(),
                        now.uptime_ns() / 1e9, now.reloads());
  absl::StrAppendFormat(&out, "admission: %u/%u ops, %s/%s in flight, %u streams open\n",
                        a.inflight_ops(), a.max_inflight_ops(),
                        Bytes(static_cast<double>(a.inflight_bytes())),
                        gdr::FormatSize(a.max_inflight_bytes()), a.open_streams());
  AppendScope(&out, "total", now.total(), previous ? &previous->total() : nullptr, secs, "");
  for (int i = 0; i < now.transports_size(); ++i) {
    const auto& t = now.transports(i);
    const bool idle = t.ops().write_ops() + t.ops().read_ops() + t.ops().errors_size() == 0 &&
                      t.pool().capacity() == 0;
    if (idle) continue;  // a transport this daemon does not run
    const v1::OpCounters* prev = nullptr;
    if (previous != nullptr && i < previous->transports_size()) prev = &previous->transports(i).ops();
    const v1::PoolStats& pool = t.pool();
    std::string pool_line = absl::StrFormat("pool %u/%u in use, %u clients", pool.in_use(),
                                            pool.capacity(), pool.destinations());
    if (pool.errors() != 0 || pool.recoveries() != 0) {
      absl::StrAppendFormat(&pool_line, ", %u transport errors, %u recovered", pool.errors(),
                            pool.recoveries());
    }
    if (pool.waiting_ops() != 0 || pool.handovers() != 0) {
      absl::StrAppendFormat(&pool_line, ", %u ops waiting for the pool, %u handovers",
                            pool.waiting_ops(), pool.handovers());
    }
    AppendScope(&out, absl::StrCat("transport ", gdr::TransportName(t.transport())), t.ops(),
                prev, secs, pool_line);
  }
  for (int i = 0; i < now.rails_size(); ++i) {
    const v1::RailStats& r = now.rails(i);
    absl::StrAppendFormat(&out, "rail %d %s%s  %u ops %s, %u errors, %u refused; port down %u, "
                          "up %u",
                          i, r.device(), r.serving() ? "" : " (NOT SERVING)", r.ops(),
                          Bytes(static_cast<double>(r.bytes())), r.errors(), r.refused(),
                          r.down_events(), r.up_events());
    if (previous != nullptr && i < previous->rails_size() &&
        previous->rails(i).device() == r.device() && secs > 0) {
      const v1::RailStats& p = previous->rails(i);
      absl::StrAppendFormat(&out, "   %8.0f ops/s %10s/s", (r.ops() - p.ops()) / secs,
                            Bytes((r.bytes() - p.bytes()) / secs));
    }
    absl::StrAppend(&out, "\n");
  }
  for (int i = 0; i < now.volumes_size(); ++i) {
    const auto& v = now.volumes(i);
    const v1::OpCounters* prev = nullptr;
    if (previous != nullptr && i < previous->volumes_size() &&
        previous->volumes(i).name() == v.name()) {
      prev = &previous->volumes(i).ops();
    }
    std::string extra = MediaLine(v.media());
    if (v.page_locked_bytes() > 0) {
      // The local transport's GPU copies run straight from these pages, staged from the rest.
      absl::StrAppend(&extra, "; page-locked ",
                      Bytes(static_cast<double>(v.page_locked_bytes())));
    }
    AppendScope(&out, absl::StrCat("volume ", v.name()), v.ops(), prev, secs, extra);
  }
  for (const v1::FaultStats& f : now.faults()) {
    absl::StrAppendFormat(&out, "fault %s on %s: %u hits\n", f.kind(),
                          f.rail().empty() ? absl::StrCat("volume ", f.volume())
                                           : absl::StrCat("rail ", f.rail()),
                          f.hits());
  }
  if (now.has_trace()) {
    const v1::TraceStats& t = now.trace();
    absl::StrAppendFormat(&out, "trace %s: %u ops recorded, %u dropped, file %s\n", t.file(),
                          t.records(), t.dropped(), Bytes(static_cast<double>(t.bytes())));
  }
  return out;
}

absl::Status RunStats(gdrstore::Client& client, const StatsOptions& o) {
  v1::GetStatsResponse previous;
  bool have_previous = false;
  absl::Time previous_at;
  const bool tty = ::isatty(1);
  for (uint64_t n = 0;; ++n) {
    // Every page of the per-volume (per-session) figures, within the one timeout.
    absl::StatusOr<v1::GetStatsResponse> resp =
        client.GetStats(absl::ToChronoMilliseconds(o.rpc_timeout));
    const absl::Time at = absl::Now();
    if (!resp.ok()) {
      return absl::Status(resp.status().code(),
                          absl::StrCat("GetStats: ", resp.status().message()));
    }
    if (o.json) {
      std::cout << MessageJson(*resp) << std::endl;
    } else {
      if (o.watch && tty) std::cout << "\033[H\033[2J";  // clear the screen between samples
      std::cout << FormatStats(*resp, have_previous ? &previous : nullptr, at - previous_at);
      if (o.watch && !tty) std::cout << "--\n";
      std::cout.flush();
    }
    if (!o.watch || (o.count != 0 && n + 1 >= o.count)) return absl::OkStatus();
    previous = *std::move(resp);
    previous_at = at;
    have_previous = true;
    absl::SleepFor(o.interval);
  }
}

}  // namespace gdrctl
