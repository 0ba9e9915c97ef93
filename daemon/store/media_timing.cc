#include "daemon/store/media_timing.h"

#include <algorithm>

namespace gdr {

void MediaModel::Set(MediaSettings settings) {
  absl::MutexLock lock(&mu_);
  settings_ = settings;
  enabled_.store(settings.enabled(), std::memory_order_relaxed);
}

MediaSettings MediaModel::settings() const {
  absl::MutexLock lock(&mu_);
  return settings_;
}

absl::Time MediaModel::Reserve(uint64_t bytes, absl::Time now) {
  if (!enabled_.load(std::memory_order_relaxed)) return now;
  absl::MutexLock lock(&mu_);
  absl::Time done = now;
  if (settings_.bandwidth != 0) {
    const absl::Duration xfer =
        absl::Seconds(static_cast<double>(bytes) / static_cast<double>(settings_.bandwidth));
    busy_until_ = std::max(busy_until_, now) + xfer;
    done = busy_until_;
  }
  return done + absl::Microseconds(static_cast<int64_t>(settings_.latency_us));
}

MediaTiming::MediaTiming(const std::map<std::string, MediaSettings>& volumes) {
  for (const auto& [name, s] : volumes) {
    auto m = std::make_unique<MediaModel>();
    m->Set(s);
    models_.emplace(name, std::move(m));
  }
}

MediaModel* MediaTiming::Find(absl::string_view volume) const {
  auto it = models_.find(volume);
  return it == models_.end() ? nullptr : it->second.get();
}

}  // namespace gdr
