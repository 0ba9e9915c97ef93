// gdrstored's op accounting: per transport, per volume and in total, counts and bytes by
// direction, errors by status code, ops/bytes in flight and latency histograms. Recording is
// lock-free (relaxed atomics) so it can sit on every op's path; GetStats and the systemd STATUS
// line read snapshots.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/wire/transport_kind.h"
#include "daemon/store/direction.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

// Log-linear latency histogram: 8 buckets per power of two from 1 us to ~2^37 ns, plus exact
// count, sum and max. Percentiles are within 1/8 of an octave (~9%). Lock-free.
class LatencyHistogram {
 public:
  static constexpr int kSubBuckets = 8;
  static constexpr int kMinShift = 10;  // bucket 0 holds everything below 1024 ns
  static constexpr int kOctaves = 28;
  static constexpr int kBuckets = kOctaves * kSubBuckets + 1;

  void Record(uint64_t ns);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  // Nanoseconds at quantile q in [0, 1]; 0 when empty.
  uint64_t Percentile(double q) const;
  uint64_t max_ns() const { return max_.load(std::memory_order_relaxed); }
  uint64_t sum_ns() const { return sum_.load(std::memory_order_relaxed); }
  // Samples in `bucket` (0 .. kBuckets-1): those above BucketUpperNs(bucket - 1) and at most
  // BucketUpperNs(bucket); the last bucket holds everything above.
  uint64_t bucket_count(int bucket) const {
    return buckets_[bucket].load(std::memory_order_relaxed);
  }
  static int BucketOf(uint64_t ns);
  static uint64_t BucketUpperNs(int bucket);

 private:
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_{0};
  std::atomic<uint64_t> max_{0};
};

// Counters of one scope (a transport, a volume, or everything).
class OpCounters {
 public:
  static constexpr int kCodes = 17;  // absl/gRPC status codes 0..16
  void Started(uint64_t bytes);
  // `ok` ops count toward ops/bytes/latency; others toward errors[code]. `started` says whether
  // Started() ran for this op (false for ops refused before admission).
  void Finished(Direction direction, absl::StatusCode code, uint64_t bytes, uint64_t latency_ns,
                bool started);
  void Fill(gdrstore::v1::OpCounters* out) const;

  uint64_t ops(Direction d) const { return ops_[Index(d)].load(std::memory_order_relaxed); }
  uint64_t bytes(Direction d) const { return bytes_[Index(d)].load(std::memory_order_relaxed); }
  uint64_t errors(absl::StatusCode c) const;
  int64_t inflight_ops() const { return inflight_ops_.load(std::memory_order_relaxed); }
  const LatencyHistogram& latency(Direction d) const { return latency_[Index(d)]; }

 private:
  static int Index(Direction d) { return d == Direction::kStoreToClient ? 0 : 1; }
  std::array<std::atomic<uint64_t>, 2> ops_{};
  std::array<std::atomic<uint64_t>, 2> bytes_{};
  std::array<std::atomic<uint64_t>, kCodes> errors_{};
  std::atomic<int64_t> inflight_ops_{0};
  std::atomic<int64_t> inflight_bytes_{0};
  std::array<LatencyHistogram, 2> latency_;
};

// Scopes an op is accounted in. Resolved once per op (volume lookup), then passed around.
struct OpScopes {
  OpCounters* transport = nullptr;  // nullptr when the request named no known transport
  OpCounters* volume = nullptr;     // nullptr when the volume does not exist
  OpCounters* client = nullptr;     // nullptr when no client identity was given
};

class ClientStats;

class DaemonStats {
 public:
  // One OpCounters per volume name; AddVolume for one made later.
  explicit DaemonStats(const std::vector<std::string>& volume_names);
  ~DaemonStats();

  // Scopes for a request's transport (none when it named none), volume name and client
  // identity (daemon/observe/client_stats.h: ClientIdentity; empty: not counted per client).
  OpScopes Resolve(std::optional<TransportKind> transport, absl::string_view volume,
                   absl::string_view client = {});
  void Started(const OpScopes& scopes, uint64_t bytes);
  void Finished(const OpScopes& scopes, Direction direction, absl::StatusCode code,
                uint64_t bytes, uint64_t latency_ns, bool started);
  // An op's two entries on the op path: Begin (Resolve, then Started) when it starts, and
  // Finished on its scopes when it is answered; an op refused before it started is one
  // Refused (Resolve, then Finished with started = false).
  OpScopes Begin(TransportKind transport, absl::string_view volume, absl::string_view client,
                 uint64_t bytes);
  void Refused(std::optional<TransportKind> transport, absl::string_view volume,
               absl::string_view client, Direction direction, absl::StatusCode code);

  const OpCounters& total() const { return total_; }
  const OpCounters& transport(TransportKind kind) const {
    return transports_[static_cast<size_t>(kind)];
  }
  // Counters for a volume made at run time. Those of a deleted volume stay (ops in flight
  // count into them) but are no longer shown; a volume made again under the name continues
  // them. Thread-safe.
  void AddVolume(const std::string& name);
  void HideVolume(absl::string_view name);
  // The volumes shown now, by name.
  std::vector<std::pair<std::string, const OpCounters*>> volumes() const;
  absl::Time started_at() const { return started_at_; }
  uint64_t reloads() const { return reloads_.load(); }
  void CountReload() { reloads_.fetch_add(1); }

  // Which volumes' figures one GetStats answer holds: those named after `after` (bytewise; empty:
  // from the first) that `shown` accepts (unset: all), at most `max_entries` (0: no limit).
  struct VolumePage {
    std::string after;
    uint32_t max_entries = 0;
    std::function<bool(absl::string_view name)> shown;
  };
  // Everything but pool/admission figures (the service adds those), the volumes of `page`
  // only: next_page_after is set to the last one listed when a further one would be shown.
  void Fill(gdrstore::v1::GetStatsResponse* out, const VolumePage& page) const;
  void Fill(gdrstore::v1::GetStatsResponse* out) const { Fill(out, VolumePage()); }

 private:
  absl::Time started_at_;
  OpCounters total_;
  std::array<OpCounters, std::size(kTransportKinds)> transports_;  // by TransportKind
  struct VolumeEntry {
    std::unique_ptr<OpCounters> counters;
    bool shown = true;
  };
  mutable absl::Mutex volumes_mu_;
  std::map<std::string, VolumeEntry, std::less<>> volumes_ ABSL_GUARDED_BY(volumes_mu_);
  std::atomic<uint64_t> reloads_{0};
  std::unique_ptr<ClientStats> clients_;
};

}  // namespace gdr
