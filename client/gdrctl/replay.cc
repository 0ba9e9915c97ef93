#include "client/gdrctl/replay.h"

#include <algorithm>
#include <map>
#include <span>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/base/json.h"
#include "common/base/pattern.h"
#include "common/wire/trace_format.h"

namespace gdrctl {
namespace {

namespace trace = gdr::trace;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;  // as gdrctl's: an option that cannot apply to this trace
constexpr int kExitMismatch = 3;
// Ops one replay client keeps in flight at most (and buffer slots it allocates).
constexpr size_t kMaxSlots = 64;

// Ops, bytes and latencies of one kind, recorded or replayed.
struct KindFigures {
  uint64_t ops = 0;
  uint64_t bytes = 0;
  std::vector<uint64_t> latency_ns;

  void Add(uint64_t length, uint64_t ns) {
    ++ops;
    bytes += length;
    latency_ns.push_back(ns);
  }
  // The q-quantile (nearest rank) in microseconds; 0 without ops.
  double QuantileUs(double q) {
    if (latency_ns.empty()) return 0;
    std::sort(latency_ns.begin(), latency_ns.end());
    size_t i = static_cast<size_t>(q * static_cast<double>(latency_ns.size()));
    if (i >= latency_ns.size()) i = latency_ns.size() - 1;
    return static_cast<double>(latency_ns[i]) / 1e3;
  }
};

struct Figures {
  KindFigures kind[2];  // by trace::OpKind
  double span_s = 0;
  uint64_t failed = 0;
  std::map<std::string, uint64_t> failed_by_code;
};

struct ReplayOp {
  const trace::TraceOp* op;
  std::string volume;  // after --volume-map
};

// One replay client: its ops in start order and what came back.
struct ReplayClient {
  std::vector<ReplayOp> ops;
  size_t slots = 1;
  uint64_t slot_bytes = 0;
  std::unique_ptr<gdrstore::Client> client;
  std::unique_ptr<gdrstore::Buffer> buffer;
  std::unique_ptr<gdrstore::OpStream> stream;

  absl::Mutex mu;
  std::vector<size_t> free_slots ABSL_GUARDED_BY(mu);
  Figures got ABSL_GUARDED_BY(mu);
  uint64_t mismatches ABSL_GUARDED_BY(mu) = 0;
  std::string first_mismatch ABSL_GUARDED_BY(mu);
  absl::Time last_done ABSL_GUARDED_BY(mu) = absl::InfinitePast();
};

// The most of `ops` in flight at once in the recording, [start, start + latency) each.
size_t RecordedConcurrency(const std::vector<ReplayOp>& ops) {
  std::vector<std::pair<int64_t, int>> edges;
  for (const ReplayOp& r : ops) {
    edges.emplace_back(r.op->start_ns, 1);
    edges.emplace_back(r.op->start_ns + static_cast<int64_t>(r.op->latency_ns), -1);
  }
  std::sort(edges.begin(), edges.end());  // an end before a start at the same instant
  int now = 0, most = 0;
  for (const auto& [at, d] : edges) most = std::max(most, now += d);
  return static_cast<size_t>(std::max(most, 1));
}

std::string Us(double us) { return absl::StrFormat("%.1f", us); }

void PrintTable(Figures& rec, Figures& rep, std::ostream& out) {
  out << absl::StrFormat("%-16s %16s %16s\n", "", "recorded", "replayed");
  for (int k = 0; k < 2; ++k) {
    KindFigures& a = rec.kind[k];
    KindFigures& b = rep.kind[k];
    if (a.ops == 0 && b.ops == 0) continue;
    const std::string n = trace::OpKindName(static_cast<trace::OpKind>(k));
    auto row = [&](const std::string& what, const std::string& x, const std::string& y) {
      out << absl::StrFormat("%-16s %16s %16s\n", absl::StrCat(n, " ", what), x, y);
    };
    row("ops", absl::StrCat(a.ops), absl::StrCat(b.ops));
    row("bytes", absl::StrCat(a.bytes), absl::StrCat(b.bytes));
    row("p50 us", Us(a.QuantileUs(0.5)), Us(b.QuantileUs(0.5)));
    row("p90 us", Us(a.QuantileUs(0.9)), Us(b.QuantileUs(0.9)));
    row("p99 us", Us(a.QuantileUs(0.99)), Us(b.QuantileUs(0.99)));
    row("max us", Us(a.QuantileUs(1.0)), Us(b.QuantileUs(1.0)));
  }
  out << absl::StrFormat("%-16s %16.3f %16.3f\n", "span s", rec.span_s, rep.span_s);
  out << absl::StrFormat("%-16s %16s %16u\n", "failed", "-", rep.failed);
}

gdr::json::Json KindJson(KindFigures& f) {
  using gdr::json::Fixed;
  return {{"ops", f.ops},
          {"bytes", f.bytes},
          {"p50_us", Fixed(f.QuantileUs(0.5), 1)},
          {"p90_us", Fixed(f.QuantileUs(0.9), 1)},
          {"p99_us", Fixed(f.QuantileUs(0.99), 1)},
          {"max_us", Fixed(f.QuantileUs(1.0), 1)}};
}

gdr::json::Json FiguresJson(Figures& f) {
  gdr::json::Json codes = gdr::json::Json::object();
  for (const auto& [code, n] : f.failed_by_code) codes[code] = n;
  return {{"get", KindJson(f.kind[0])},
          {"put", KindJson(f.kind[1])},
          {"span_s", gdr::json::Fixed(f.span_s, 6)},
          {"failed", f.failed},
          {"failed_by_code", std::move(codes)}};
}

// Issues one client's ops: at their recorded offsets from `t0` (or at once when fast), each
// waiting for a free buffer slot.
void Drive(ReplayClient& rc, const ReplayOptions& o, absl::Time t0, int64_t first_start_ns) {
  for (const ReplayOp& r : rc.ops) {
    if (!o.fast) {
      const absl::Time due = t0 + absl::Nanoseconds(r.op->start_ns - first_start_ns);
      const absl::Duration wait = due - absl::Now();
      if (wait > absl::ZeroDuration()) absl::SleepFor(wait);
    }
    size_t slot;
    {
      absl::MutexLock lock(&rc.mu);
      rc.mu.Await(absl::Condition(
          +[](std::vector<size_t>* f) { return !f->empty(); }, &rc.free_slots));
      slot = rc.free_slots.back();
      rc.free_slots.pop_back();
    }
    const trace::TraceOp& op = *r.op;
    const uint64_t buffer_offset = slot * rc.slot_bytes;
    std::span<std::byte> bytes(rc.buffer->data() + buffer_offset, op.length);
    const uint64_t seed = gdr::PatternSeed(r.volume);
    if (o.verify && op.kind == trace::OpKind::kPut) gdr::PatternFill(seed, op.offset, bytes);
    const gdrstore::OpKind kind =
        op.kind == trace::OpKind::kGet ? gdrstore::OpKind::kWrite : gdrstore::OpKind::kRead;
    rc.stream->Submit(
        kind, {r.volume, op.offset, op.length}, *rc.buffer, buffer_offset,
        [&rc, &o, &op, slot, bytes, seed](absl::StatusOr<gdrstore::OpResult> res) {
          std::string mismatch;
          if (res.ok() && o.verify && op.kind == trace::OpKind::kGet) {
            if (auto bad = gdr::PatternMismatch(seed, op.offset, bytes)) {
              mismatch = absl::StrFormat("verify failed at volume offset %u", op.offset + *bad);
            }
          }
          absl::MutexLock lock(&rc.mu);
          if (res.ok()) {
            rc.got.kind[static_cast<int>(op.kind)].Add(res->bytes, res->service_ns);
          } else {
            ++rc.got.failed;
            ++rc.got.failed_by_code[absl::StatusCodeToString(res.status().code())];
          }
          if (!mismatch.empty() && rc.mismatches++ == 0) rc.first_mismatch = mismatch;
          rc.last_done = absl::Now();
          rc.free_slots.push_back(slot);
        });
  }
}

}  // namespace

absl::Status ParseVolumeMap(const std::vector<std::string>& entries,
                            absl::flat_hash_map<std::string, std::string>* map) {
  for (const std::string& e : entries) {
    std::vector<std::string> parts = absl::StrSplit(e, absl::MaxSplits('=', 1));
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--volume-map: '", e, "' is not RECORDED=REPLAYED"));
    }
    if (!map->emplace(parts[0], parts[1]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("--volume-map: volume '", parts[0], "' is mapped twice"));
    }
  }
  return absl::OkStatus();
}

int RunReplay(const ReplayOptions& o, const ClientFactory& connect, std::ostream& out,
              std::ostream& err) {
  absl::StatusOr<trace::Trace> t = trace::ReadTraceFile(o.file);
  if (!t.ok()) {
    err << "gdrctl: " << t.status().message() << "\n";
    return kExitFailed;
  }
  // Ops that failed when recorded are not replayed: their failure was the daemon's answer
  // then, not load to reproduce.
  Figures rec;
  std::vector<const trace::TraceOp*> chosen;
  uint64_t skipped = 0;
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const trace::TraceOp& op : t->ops) {
    if (op.code != 0) {
      ++skipped;
      continue;
    }
    chosen.push_back(&op);
    rec.kind[static_cast<int>(op.kind)].Add(op.length, op.latency_ns);
    first = std::min(first, op.start_ns);
    last = std::max(last, op.start_ns + static_cast<int64_t>(op.latency_ns));
  }
  if (chosen.empty()) {
    err << "gdrctl: trace " << o.file << ": no successful op to replay (" << t->ops.size()
        << " records, " << skipped << " failed)\n";
    return kExitFailed;
  }
  rec.span_s = static_cast<double>(last - first) / 1e9;
  std::sort(chosen.begin(), chosen.end(), [](const trace::TraceOp* a, const trace::TraceOp* b) {
    return a->start_ns < b->start_ns;
  });

  // Recorded clients with ops, in order of their first op, numbered densely.
  absl::flat_hash_map<uint32_t, size_t> dense;
  for (const trace::TraceOp* op : chosen) dense.try_emplace(op->client, dense.size());
  // Checked before anything is allocated per client: a replay client beyond the recorded
  // ones would get no op (recorded client i goes to i % N), so asking for more is a mistake,
  // not a bigger load.
  if (o.clients > dense.size()) {
    err << "gdrctl: replay --clients " << o.clients << ": trace " << o.file << " recorded "
        << dense.size() << " client" << (dense.size() == 1 ? "" : "s")
        << " with ops to replay; more replay clients than recorded ones would have nothing to "
           "issue (use at most "
        << dense.size() << ", or as-recorded)\n";
    return kExitUsage;
  }
  for (const auto& [recorded, replayed] : o.volume_map) {
    if (std::find(t->volumes.begin(), t->volumes.end(), recorded) == t->volumes.end()) {
      err << "gdrctl: replay --volume-map " << recorded << "=" << replayed << ": trace "
          << o.file << " has no volume '" << recorded << "' (volumes: "
          << absl::StrJoin(t->volumes, ", ") << ")\n";
      return kExitUsage;
    }
  }
  const size_t n = o.clients == 0 ? dense.size() : o.clients;
  std::vector<std::unique_ptr<ReplayClient>> clients;
  for (size_t i = 0; i < n; ++i) clients.push_back(std::make_unique<ReplayClient>());
  for (const trace::TraceOp* op : chosen) {
    std::string volume = t->volumes[op->volume];
    if (auto it = o.volume_map.find(volume); it != o.volume_map.end()) volume = it->second;
    clients[dense[op->client] % n]->ops.push_back({op, std::move(volume)});
  }
  for (size_t i = 0; i < n; ++i) {
    ReplayClient& rc = *clients[i];
    if (rc.ops.empty()) continue;
    rc.slots = std::min(RecordedConcurrency(rc.ops), kMaxSlots);
    for (const ReplayOp& r : rc.ops) rc.slot_bytes = std::max(rc.slot_bytes, r.op->length);
    // The reader bounds each length (trace::kMaxOpLength), so this cannot wrap with at most
    // kMaxSlots slots; checked anyway, as every size computed from a file is.
    uint64_t buffer_bytes = 0;
    if (__builtin_mul_overflow(rc.slots, rc.slot_bytes, &buffer_bytes)) {
      err << "gdrctl: replay client " << i << ": " << rc.slots << " slots of " << rc.slot_bytes
          << " bytes pass 2^64 - 1\n";
      return kExitFailed;
    }
    absl::StatusOr<std::unique_ptr<gdrstore::Client>> c = connect();
    if (!c.ok()) {
      err << "gdrctl: connect (replay client " << i << "): " << c.status() << "\n";
      return kExitFailed;
    }
    rc.client = std::move(*c);
    auto b = rc.client->AllocateBuffer(buffer_bytes);
    if (!b.ok()) {
      err << "gdrctl: allocate (replay client " << i << "): " << b.status() << "\n";
      return kExitFailed;
    }
    rc.buffer = std::move(*b);
    auto s = rc.client->OpenStream();
    if (!s.ok()) {
      err << "gdrctl: open stream (replay client " << i << "): " << s.status() << "\n";
      return kExitFailed;
    }
    rc.stream = std::move(*s);
    absl::MutexLock lock(&rc.mu);
    for (size_t k = 0; k < rc.slots; ++k) rc.free_slots.push_back(k);
  }

  auto count = [](size_t k, const char* what) {
    return absl::StrCat(k, " ", what, k == 1 ? "" : "s");
  };
  out << "trace " << o.file << ": " << count(t->ops.size(), "op") << ", "
      << count(t->clients.size(), "client") << ", " << count(t->volumes.size(), "volume")
      << "; replaying " << chosen.size() << " as " << count(n, "client") << ", pace "
      << (o.fast ? "fast" : "recorded");
  if (skipped > 0) out << " (" << skipped << " recorded as failed: not replayed)";
  out << "\n";

  const absl::Time t0 = absl::Now();
  std::vector<std::thread> drivers;
  for (auto& rc : clients) {
    if (rc->ops.empty()) continue;
    drivers.emplace_back([&rc, &o, t0, first] { Drive(*rc, o, t0, first); });
  }
  for (std::thread& d : drivers) d.join();
  absl::Time end = t0;
  Figures rep;
  uint64_t mismatches = 0;
  std::string first_mismatch;
  for (auto& rc : clients) {
    if (rc->ops.empty()) continue;
    if (absl::Status s = rc->stream->Close(); !s.ok()) {
      err << "gdrctl: stream: " << s << "\n";
    }
    absl::MutexLock lock(&rc->mu);
    for (int k = 0; k < 2; ++k) {
      rep.kind[k].ops += rc->got.kind[k].ops;
      rep.kind[k].bytes += rc->got.kind[k].bytes;
      rep.kind[k].latency_ns.insert(rep.kind[k].latency_ns.end(),
                                    rc->got.kind[k].latency_ns.begin(),
                                    rc->got.kind[k].latency_ns.end());
    }
    rep.failed += rc->got.failed;
    for (const auto& [code, c] : rc->got.failed_by_code) rep.failed_by_code[code] += c;
    if (rc->mismatches > 0 && mismatches == 0) first_mismatch = rc->first_mismatch;
    mismatches += rc->mismatches;
    end = std::max(end, rc->last_done);
  }
  rep.span_s = absl::ToDoubleSeconds(end - t0);
  if (o.json) {
    const gdr::json::Json doc = {{"clients", n},
                                 {"pace", o.fast ? "fast" : "recorded"},
                                 {"skipped", skipped},
                                 {"recorded", FiguresJson(rec)},
                                 {"replayed", FiguresJson(rep)},
                                 {"verify_mismatches", mismatches}};
    out << gdr::json::Dump(doc) << "\n";
  } else {
    PrintTable(rec, rep, out);
  }
  if (rep.failed > 0) {
    std::string codes;
    for (const auto& [code, c] : rep.failed_by_code) {
      absl::StrAppend(&codes, codes.empty() ? "" : ", ", code, " ", c);
    }
    err << "gdrctl: replay: " << rep.failed << " ops failed (" << codes << ")\n";
    return kExitFailed;
  }
  if (mismatches > 0) {
    err << "gdrctl: replay: " << mismatches << " gets did not hold the volume's initial fill; "
        << "first: " << first_mismatch << "\n";
    return kExitMismatch;
  }
  return kExitOk;
}

}  // namespace gdrctl
