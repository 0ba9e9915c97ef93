// Simulated media timing of a volume: one model of a device shared by every op
// on the volume, so clients can rehearse against NVMe-, SATA-, disk- or
// object-store-like storage. An op waits for a slot in the device's queue
// (queue_depth) and for its turn under the IOPS limits, moves its bytes at the
// bandwidth it shares with the other ops (per direction and overall), then
// takes its sampled latency. Settings change live on SIGHUP.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/sim/latency_sampler.h"
#include "daemon/store/direction.h"
#include "daemon/store/media_settings.h"

namespace gdr {

// What a model has done since its settings were last set.
struct MediaCounters {
  uint64_t ops = 0;         // ops booked
  uint64_t queued_ops = 0;  // of those, ops that waited (slot, IOPS or bandwidth)
  uint64_t wait_ns = 0;     // their waits together, before their bytes started to move
  uint32_t in_device = 0;   // ops holding a queue slot now (0 without a queue_depth)
};

// One volume's simulated device. Thread-safe; Reserve is O(log queue_depth)
// under one lock and starts no thread (the caller holds the completion until
// the returned time, e.g. DelayQueue).
class MediaModel {
 public:
  // Replaces the settings, starts the latency samples over from the seed and
  // forgets the device's state (queue, IOPS pacing, bandwidth backlog) and
  // counters.
  void Set(MediaSettings settings);
  MediaSettings settings() const;
  MediaCounters counters(absl::Time now) const;

  // Books an op of `bytes` in `direction` arriving at `now` (kStoreToClient
  // reads the device, kClientToStore writes it); returns the earliest time it
  // may complete (`now` when timing is off). Ops are served in
  // the order they are booked. Times passed in should not go backwards by more
  // than scheduling jitter.
  absl::Time Reserve(Direction direction, uint64_t bytes, absl::Time now);

 private:
  std::atomic<bool> enabled_{false};
  mutable absl::Mutex mu_;
  MediaSettings settings_ ABSL_GUARDED_BY(mu_);
  std::optional<LatencySampler> sampler_ ABSL_GUARDED_BY(mu_);
  // Completion times of the ops in the device, earliest first (only with a
  // queue_depth).
  std::priority_queue<absl::Time, std::vector<absl::Time>, std::greater<>> slots_
      ABSL_GUARDED_BY(mu_);
  absl::Time next_op_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // iops
  absl::Time next_dir_op_[2] ABSL_GUARDED_BY(mu_) = {absl::InfinitePast(), absl::InfinitePast()};
  absl::Time busy_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // bandwidth
  absl::Time busy_dir_[2] ABSL_GUARDED_BY(mu_) = {absl::InfinitePast(), absl::InfinitePast()};
  MediaCounters counters_ ABSL_GUARDED_BY(mu_);
};

// The models of all volumes, by name; volumes made and deleted at run time come and go.
// Thread-safe.
class MediaTiming {
 public:
  explicit MediaTiming(const std::map<std::string, MediaSettings>& volumes);
  // nullptr when unknown; held, a model outlives its removal.
  std::shared_ptr<MediaModel> Find(absl::string_view volume) const;
  // A model for a new volume (replacing one of the name).
  void Add(const std::string& volume, const MediaSettings& settings);
  void Remove(absl::string_view volume);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<MediaModel>, std::less<>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gdr
