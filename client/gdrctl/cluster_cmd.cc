#include "client/gdrctl/cluster_cmd.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/src/cluster/layout.h"
#include "client/src/cluster/status_json.h"
#include "common/base/pattern.h"
#include "common/base/units.h"

namespace gdrctl {

namespace {

constexpr int kOk = 0, kFailed = 1, kMismatch = 3;

int Failed(const absl::Status& st, const std::string& what) {
  std::fprintf(stderr, "gdrctl: %s: %s: %s\n", what.c_str(),
               absl::StatusCodeToString(st.code()).c_str(), std::string(st.message()).c_str());
  return kFailed;
}

using gdr::cluster::JsonQuote;

}  // namespace

int ClusterStatus(gdrstore::ClusterClient& c, bool json, std::ostream& out) {
  const std::vector<gdrstore::ClusterMemberStatus> members = c.Members();
  const std::vector<gdrstore::v1::ClusterVolume> volumes = c.Volumes();
  size_t healthy = 0;
  for (const auto& m : members) healthy += m.present && m.healthy;
  if (json) {
    out << gdr::cluster::StatusJson(c.source(), members, volumes) << "\n";
  } else {
    out << "cluster " << c.source() << ": " << members.size() << " members known, " << healthy
        << " present and healthy\n";
    out << absl::StrFormat("  %-16s %-22s %-8s %-9s %-9s %-10s %s\n", "member", "address",
                           "present", "health", "lease", "version", "volumes");
    for (const auto& m : members) {
      std::vector<std::string> vols;
      for (const auto& v : m.entry.volumes()) {
        vols.push_back(absl::StrCat(v.name(), " ", gdr::FormatSize(v.size())));
      }
      out << absl::StrFormat(
          "  %-16s %-22s %-8s %-9s %-9s %-10s %s\n", m.entry.id(), m.entry.address(),
          m.present ? "yes" : "no", m.healthy ? "ok" : "down",
          m.lease_ttl_s >= 0 ? absl::StrCat(m.lease_ttl_s, " s") : "-", m.entry.version(),
          absl::StrJoin(vols, ", "));
      if (!m.healthy && !m.error.empty()) out << "      " << m.error << "\n";
    }
    out << "volumes:\n";
    if (volumes.empty()) out << "  (none: gdrctl cluster create-volume NAME)\n";
    for (const auto& v : volumes) {
      out << absl::StrFormat("  %-16s %s, stripe unit %s, replicas %u, epoch %u, members %s\n",
                             v.name(), gdr::FormatSize(v.size()),
                             gdr::FormatSize(v.stripe_unit()), v.replicas(), v.epoch(),
                             absl::StrJoin(v.members(), ","));
    }
  }
  return healthy == members.size() ? kOk : kFailed;
}

int ClusterCreateVolume(gdrstore::ClusterClient& c, const std::string& name,
                        uint64_t stripe_unit, uint32_t replicas,
                        const std::vector<std::string>& members, bool json, std::ostream& out) {
  absl::StatusOr<gdrstore::v1::ClusterVolume> l =
      c.CreateVolume(name, stripe_unit, replicas, members);
  if (!l.ok()) return Failed(l.status(), "cluster create-volume");
  if (json) {
    out << gdr::cluster::ToJson(*l) << "\n";
  } else {
    out << "created cluster volume " << l->name() << ": " << gdr::FormatSize(l->size())
        << " over " << absl::StrJoin(l->members(), ",") << ", stripe unit "
        << gdr::FormatSize(l->stripe_unit()) << ", replicas " << l->replicas() << "\n";
  }
  return kOk;
}

int ClusterOp(gdrstore::ClusterClient& c, bool put, const ClusterOpArgs& a, bool json,
              std::ostream& out) {
  absl::StatusOr<std::unique_ptr<gdrstore::ClusterBuffer>> buf = c.AllocateBuffer(a.size);
  if (!buf.ok()) return Failed(buf.status(), "buffer");
  const uint64_t seed = gdr::PatternSeed(a.volume, a.salt);
  std::span<std::byte> bytes((*buf)->data(), a.size);
  if (put) gdr::PatternFill(seed, a.offset, bytes);
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status st = put ? c.Put(a.volume, a.offset, a.size, **buf)
                        : c.Get(a.volume, a.offset, a.size, **buf);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) return Failed(st, put ? "cluster put" : "cluster get");
  std::optional<size_t> bad;
  if (!put && a.verify) bad = gdr::PatternMismatch(seed, a.offset, bytes);
  if (json) {
    out << "{\"op\":\"" << (put ? "put" : "get") << "\",\"volume\":" << JsonQuote(a.volume)
        << ",\"offset\":" << a.offset << ",\"bytes\":" << a.size << ",\"seconds\":" << s
        << ",\"verified\":" << (a.verify && !put && !bad ? "true" : "false") << "}\n";
  } else {
    out << (put ? "put " : "get ") << gdr::FormatSize(a.size) << " at " << a.volume << "@"
        << a.offset << " in " << absl::StrFormat("%.3f ms", s * 1e3)
        << (a.verify && !put ? (bad ? "" : ", verified") : "") << "\n";
  }
  if (bad) {
    std::fprintf(stderr, "gdrctl: verification failed at byte %zu of the get\n", *bad);
    return kMismatch;
  }
  return kOk;
}

int ClusterBench(gdrstore::ClusterClient& c, const ClusterBenchArgs& a, bool json,
                 std::ostream& out) {
  absl::StatusOr<gdrstore::v1::ClusterVolume> layout = c.Layout(a.volume);
  if (!layout.ok()) return Failed(layout.status(), "cluster bench");
  if (a.size == 0 || a.size > layout->size() || a.qd == 0) {
    return Failed(absl::InvalidArgumentError(absl::StrCat(
                      "size ", a.size, " must be in 1..", layout->size(), " and qd >= 1")),
                  "cluster bench");
  }
  std::vector<std::unique_ptr<gdrstore::ClusterBuffer>> bufs;
  for (uint32_t i = 0; i < a.qd; ++i) {
    auto b = c.AllocateBuffer(a.size);
    if (!b.ok()) return Failed(b.status(), "buffer");
    bufs.push_back(std::move(*b));
  }
  const uint64_t slots = layout->size() / a.size;
  // One untimed op per buffer first: members connected, links opened, buffers registered with
  // each member, so the figure is the steady state.
  for (uint32_t w = 0; w < a.qd; ++w) {
    const uint64_t offset = (w % slots) * a.size;
    absl::Status st = a.put ? c.Put(a.volume, offset, a.size, *bufs[w])
                            : c.Get(a.volume, offset, a.size, *bufs[w]);
    if (!st.ok()) return Failed(st, "cluster bench (warm-up)");
  }
  std::map<std::string, uint64_t> before;
  for (const auto& m : c.Members()) before[m.entry.id()] = m.bytes;
  std::atomic<uint64_t> next{0}, failed{0};
  absl::Status first_error;
  std::mutex mu;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (uint32_t w = 0; w < a.qd; ++w) {
    workers.emplace_back([&, w] {
      for (uint64_t i = next++; i < a.iterations; i = next++) {
        const uint64_t offset = (i % slots) * a.size;
        absl::Status st = a.put ? c.Put(a.volume, offset, a.size, *bufs[w])
                                : c.Get(a.volume, offset, a.size, *bufs[w]);
        if (!st.ok()) {
          failed.fetch_add(1);
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.ok()) first_error = st;
        }
      }
    });
  }
  for (auto& t : workers) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t bytes = (a.iterations - failed.load()) * a.size;
  const double gbps = s > 0 ? double(bytes) / s / 1e9 : 0;
  std::vector<std::pair<std::string, uint64_t>> per;
  for (const auto& m : c.Members()) {
    per.emplace_back(m.entry.id(), m.bytes - before[m.entry.id()]);
  }
  if (json) {
    std::vector<std::string> ms;
    for (const auto& [id, b] : per) {
      ms.push_back(absl::StrCat("{\"id\":", JsonQuote(id), ",\"bytes\":", b, "}"));
    }
    out << "{\"op\":\"" << (a.put ? "put" : "get") << "\",\"size\":" << a.size
        << ",\"iterations\":" << a.iterations << ",\"qd\":" << a.qd << ",\"failed\":"
        << failed.load() << ",\"seconds\":" << s << ",\"gb_per_s\":" << gbps
        << ",\"members\":[" << absl::StrJoin(ms, ",") << "]}\n";
  } else {
    out << absl::StrFormat("cluster %s %s x %u, qd %u: %.3f GB/s (%.3f s)%s\n",
                           a.put ? "put" : "get", gdr::FormatSize(a.size), a.iterations, a.qd,
                           gbps, s,
                           failed.load() ? absl::StrCat(", ", failed.load(), " failed") : "");
    for (const auto& [id, b] : per) {
      out << absl::StrFormat("  member %-16s %10s  %5.1f%%\n", id, gdr::FormatSize(b),
                             bytes ? 100.0 * double(b) / double(bytes) : 0.0);
    }
  }
  if (!first_error.ok()) return Failed(first_error, "cluster bench");
  return kOk;
}

}  // namespace gdrctl
