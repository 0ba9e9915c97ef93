#include "daemon/observe/stats.h"

#include <algorithm>
#include <bit>

#include "absl/time/clock.h"
#include "daemon/observe/client_stats.h"

namespace gdr {

namespace v1 = gdrstore::v1;

namespace {

void AtomicMax(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

void FillLatency(const LatencyHistogram& h, v1::LatencySummary* out) {
  const uint64_t n = h.count();
  out->set_count(n);
  if (n == 0) return;
  out->set_mean_us(static_cast<double>(h.sum_ns()) / n / 1e3);
  out->set_p50_us(h.Percentile(0.50) / 1e3);
  out->set_p90_us(h.Percentile(0.90) / 1e3);
  out->set_p99_us(h.Percentile(0.99) / 1e3);
  out->set_p999_us(h.Percentile(0.999) / 1e3);
  out->set_max_us(h.max_ns() / 1e3);
}

}  // namespace

int LatencyHistogram::BucketOf(uint64_t ns) {
  if (ns < (uint64_t{1} << kMinShift)) return 0;
  const int octave = std::bit_width(ns) - 1;  // floor(log2 ns) >= kMinShift
  const int sub = static_cast<int>((ns >> (octave - 3)) & (kSubBuckets - 1));
  const int b = 1 + (octave - kMinShift) * kSubBuckets + sub;
  return std::min(b, kBuckets - 1);
}

uint64_t LatencyHistogram::BucketUpperNs(int bucket) {
  if (bucket <= 0) return uint64_t{1} << kMinShift;
  const int octave = (bucket - 1) / kSubBuckets + kMinShift;
  const int sub = (bucket - 1) % kSubBuckets;
  return (uint64_t{1} << octave) + (static_cast<uint64_t>(sub + 1) << (octave - 3));
}

void LatencyHistogram::Record(uint64_t ns) {
  buckets_[BucketOf(ns)].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(ns, std::memory_order_relaxed);
  AtomicMax(max_, ns);
}

uint64_t LatencyHistogram::Percentile(double q) const {
  uint64_t total = 0;
  for (const auto& b : buckets_) total += b.load(std::memory_order_relaxed);
  if (total == 0) return 0;
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(q * total + 0.5));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i].load(std::memory_order_relaxed);
    if (seen >= rank) {
      // Midpoint of the bucket, but never above the largest value seen.
      const uint64_t hi = BucketUpperNs(i);
      const uint64_t lo = i == 0 ? 0 : BucketUpperNs(i - 1);
      return std::min(max_ns(), lo + (hi - lo) / 2);
    }
  }
  return max_ns();
}

void OpCounters::Started(uint64_t bytes) {
  inflight_ops_.fetch_add(1, std::memory_order_relaxed);
  inflight_bytes_.fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed);
}

void OpCounters::Finished(Direction direction, absl::StatusCode code, uint64_t bytes,
                          uint64_t latency_ns, bool started) {
  if (started) {
    inflight_ops_.fetch_sub(1, std::memory_order_relaxed);
    inflight_bytes_.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  }
  if (code == absl::StatusCode::kOk) {
    ops_[Index(direction)].fetch_add(1, std::memory_order_relaxed);
    bytes_[Index(direction)].fetch_add(bytes, std::memory_order_relaxed);
    latency_[Index(direction)].Record(latency_ns);
    return;
  }
  const int c = static_cast<int>(code);
  errors_[c >= 0 && c < kCodes ? c : static_cast<int>(absl::StatusCode::kUnknown)].fetch_add(
      1, std::memory_order_relaxed);
}

uint64_t OpCounters::errors(absl::StatusCode c) const {
  const int i = static_cast<int>(c);
  return i >= 0 && i < kCodes ? errors_[i].load(std::memory_order_relaxed) : 0;
}

void OpCounters::Fill(v1::OpCounters* out) const {
  out->set_write_ops(ops(Direction::kStoreToClient));
  out->set_write_bytes(bytes(Direction::kStoreToClient));
  out->set_read_ops(ops(Direction::kClientToStore));
  out->set_read_bytes(bytes(Direction::kClientToStore));
  for (int c = 1; c < kCodes; ++c) {
    const uint64_t n = errors_[c].load(std::memory_order_relaxed);
    if (n == 0) continue;
    v1::ErrorCount* e = out->add_errors();
    e->set_code(c);
    e->set_name(absl::StatusCodeToString(static_cast<absl::StatusCode>(c)));
    e->set_count(n);
  }
  out->set_inflight_ops(inflight_ops_.load(std::memory_order_relaxed));
  out->set_inflight_bytes(inflight_bytes_.load(std::memory_order_relaxed));
  FillLatency(latency_[0], out->mutable_write_latency());
  FillLatency(latency_[1], out->mutable_read_latency());
}

DaemonStats::DaemonStats(const std::vector<std::string>& volume_names)
    : started_at_(absl::Now()), clients_(std::make_unique<ClientStats>()) {
  for (const std::string& n : volume_names) AddVolume(n);
}

void DaemonStats::AddVolume(const std::string& name) {
  absl::MutexLock lock(&volumes_mu_);
  VolumeEntry& e = volumes_[name];
  if (e.counters == nullptr) e.counters = std::make_unique<OpCounters>();
  e.shown = true;
}

void DaemonStats::HideVolume(absl::string_view name) {
  absl::MutexLock lock(&volumes_mu_);
  if (auto it = volumes_.find(name); it != volumes_.end()) it->second.shown = false;
}

std::vector<std::pair<std::string, const OpCounters*>> DaemonStats::volumes() const {
  absl::ReaderMutexLock lock(&volumes_mu_);
  std::vector<std::pair<std::string, const OpCounters*>> out;
  for (const auto& [name, e] : volumes_) {
    if (e.shown) out.emplace_back(name, e.counters.get());
  }
  return out;
}

DaemonStats::~DaemonStats() = default;

OpScopes DaemonStats::Resolve(std::optional<TransportKind> transport, absl::string_view volume,
                              absl::string_view client) {
  OpScopes s;
  if (!client.empty()) s.client = clients_->Resolve(client);
  if (transport) s.transport = &transports_[static_cast<size_t>(*transport)];
  {
    absl::ReaderMutexLock lock(&volumes_mu_);
    auto it = volumes_.find(volume);
    if (it != volumes_.end()) s.volume = it->second.counters.get();
  }
  return s;
}

OpScopes DaemonStats::Begin(TransportKind transport, absl::string_view volume,
                            absl::string_view client, uint64_t bytes) {
  OpScopes s = Resolve(transport, volume, client);
  Started(s, bytes);
  return s;
}

void DaemonStats::Refused(std::optional<TransportKind> transport, absl::string_view volume,
                          absl::string_view client, Direction direction, absl::StatusCode code) {
  Finished(Resolve(transport, volume, client), direction, code, 0, 0, /*started=*/false);
}

void DaemonStats::Started(const OpScopes& scopes, uint64_t bytes) {
  total_.Started(bytes);
  if (scopes.transport) scopes.transport->Started(bytes);
  if (scopes.volume) scopes.volume->Started(bytes);
  if (scopes.client) scopes.client->Started(bytes);
}

void DaemonStats::Finished(const OpScopes& scopes, Direction direction, absl::StatusCode code,
                           uint64_t bytes, uint64_t latency_ns, bool started) {
  total_.Finished(direction, code, bytes, latency_ns, started);
  if (scopes.transport) scopes.transport->Finished(direction, code, bytes, latency_ns, started);
  if (scopes.volume) scopes.volume->Finished(direction, code, bytes, latency_ns, started);
  if (scopes.client) scopes.client->Finished(direction, code, bytes, latency_ns, started);
}

void DaemonStats::Fill(v1::GetStatsResponse* out, const VolumePage& page) const {
  out->set_uptime_ns(static_cast<uint64_t>(absl::ToInt64Nanoseconds(absl::Now() - started_at_)));
  total_.Fill(out->mutable_total());
  for (TransportKind k : kTransportKinds) {
    v1::TransportStats* t = out->add_transports();
    t->set_transport(ToProto(k));
    transports_[static_cast<size_t>(k)].Fill(t->mutable_ops());
  }
  // The page's names under the lock, their figures after it: counters are never freed.
  std::vector<std::pair<std::string, const OpCounters*>> listed;
  {
    absl::ReaderMutexLock lock(&volumes_mu_);
    for (auto it = volumes_.upper_bound(page.after); it != volumes_.end(); ++it) {
      if (!it->second.shown || (page.shown && !page.shown(it->first))) continue;
      if (page.max_entries != 0 && listed.size() == page.max_entries) {
        out->set_next_page_after(listed.back().first);
        break;
      }
      listed.emplace_back(it->first, it->second.counters.get());
    }
  }
  for (const auto& [name, c] : listed) {
    v1::VolumeStats* v = out->add_volumes();
    v->set_name(name);
    c->Fill(v->mutable_ops());
  }
  out->set_reloads(reloads_.load());
  clients_->Fill(out->mutable_clients());
}

}  // namespace gdr
