// Simulated media timing of a volume, so clients can rehearse against NVMe-like or HDD-like
// storage: every op costs `latency_us` plus its bytes at `bandwidth`, and ops on one volume
// share that bandwidth (a busy device queues). Settings change live on SIGHUP.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gdr {

struct MediaSettings {
  uint64_t latency_us = 0;  // per op; 0 = none
  uint64_t bandwidth = 0;   // bytes per second; 0 = unlimited
  bool enabled() const { return latency_us != 0 || bandwidth != 0; }
  bool operator==(const MediaSettings&) const = default;
};

// One volume's simulated device. Thread-safe.
class MediaModel {
 public:
  void Set(MediaSettings settings);
  MediaSettings settings() const;
  // Books an op of `bytes` accepted at `now`: it occupies the device after the ops booked
  // before it for bytes / bandwidth, then waits `latency`. Returns the earliest time the op may
  // complete (`now` when timing is off).
  absl::Time Reserve(uint64_t bytes, absl::Time now);

 private:
  std::atomic<bool> enabled_{false};
  mutable absl::Mutex mu_;
  MediaSettings settings_ ABSL_GUARDED_BY(mu_);
  absl::Time busy_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// The models of all volumes; the set of names is fixed at creation.
class MediaTiming {
 public:
  explicit MediaTiming(const std::map<std::string, MediaSettings>& volumes);
  MediaModel* Find(absl::string_view volume) const;  // nullptr when unknown

 private:
  std::map<std::string, std::unique_ptr<MediaModel>, std::less<>> models_;
};

}  // namespace gdr
