#include "daemon/sim/media_timing.h"

#include <algorithm>

namespace gdr {
namespace {

absl::Duration Transfer(uint64_t bytes, uint64_t bytes_per_sec) {
  if (bytes_per_sec == 0) return absl::ZeroDuration();
  // Integer Duration arithmetic: exact to absl's quarter nanosecond, so long
  // runs do not drift.
  return absl::Seconds(1) * static_cast<int64_t>(bytes) / static_cast<int64_t>(bytes_per_sec);
}

}  // namespace

void MediaModel::Set(MediaSettings settings) {
  absl::MutexLock lock(&mu_);
  // A reload re-applies every volume's settings: an unchanged device keeps its
  // state.
  if (sampler_.has_value() && settings == settings_) return;
  settings_ = settings;
  sampler_.emplace(settings.latency_us, settings.p99_us, settings.seed);
  slots_ = {};
  next_op_ = busy_ = absl::InfinitePast();
  for (int d = 0; d < 2; ++d) next_dir_op_[d] = busy_dir_[d] = absl::InfinitePast();
  counters_ = {};
  enabled_.store(settings.enabled(), std::memory_order_relaxed);
}

MediaSettings MediaModel::settings() const {
  absl::MutexLock lock(&mu_);
  return settings_;
}

MediaCounters MediaModel::counters(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  MediaCounters c = counters_;
  // The heap is pruned lazily (on the next Reserve); count only the slots still
  // held at `now`.
  auto copy = slots_;
  while (!copy.empty() && copy.top() <= now) copy.pop();
  c.in_device = static_cast<uint32_t>(copy.size());
  return c;
}

absl::Time MediaModel::Reserve(Direction direction, uint64_t bytes, absl::Time now) {
  if (!enabled_.load(std::memory_order_relaxed)) return now;
  const int dir = direction == Direction::kStoreToClient ? 0 : 1;  // 0: device reads
  absl::MutexLock lock(&mu_);
  const MediaSettings& s = settings_;
  // 1. A slot in the device: ops that completed by `now` have left; a full
  // queue hands this op the slot that frees first.
  absl::Time start = now;
  if (s.queue_depth != 0) {
    while (!slots_.empty() && slots_.top() <= now) slots_.pop();
    if (slots_.size() >= s.queue_depth) {
      start = std::max(start, slots_.top());
      slots_.pop();
    }
  }
  // 2. Its turn under the IOPS limits (overall and its direction's); both count
  // it from when it starts.
  const uint64_t dir_iops = dir == 0 ? s.read_iops : s.write_iops;
  if (s.iops != 0) start = std::max(start, next_op_);
  if (dir_iops != 0) start = std::max(start, next_dir_op_[dir]);
  if (s.iops != 0) next_op_ = start + absl::Seconds(1) / static_cast<int64_t>(s.iops);
  if (dir_iops != 0) next_dir_op_[dir] = start + absl::Seconds(1) / static_cast<int64_t>(dir_iops);
  // 3. Its bytes, behind the bytes booked before it on the shared and the
  // direction's channel.
  const absl::Duration shared = Transfer(bytes, s.bandwidth);
  const absl::Duration own = Transfer(bytes, dir == 0 ? s.read_bandwidth : s.write_bandwidth);
  absl::Time xfer = start;
  if (shared > absl::ZeroDuration()) xfer = std::max(xfer, busy_);
  if (own > absl::ZeroDuration()) xfer = std::max(xfer, busy_dir_[dir]);
  if (shared > absl::ZeroDuration()) busy_ = xfer + shared;
  if (own > absl::ZeroDuration()) busy_dir_[dir] = xfer + own;
  // 4. Its latency.
  const absl::Time done = xfer + std::max(shared, own) + absl::Nanoseconds(sampler_->NextNs());
  if (s.queue_depth != 0) slots_.push(done);
  ++counters_.ops;
  if (xfer > now) {
    ++counters_.queued_ops;
    counters_.wait_ns += static_cast<uint64_t>(absl::ToInt64Nanoseconds(xfer - now));
  }
  return done;
}

MediaTiming::MediaTiming(const std::map<std::string, MediaSettings>& volumes) {
  for (const auto& [name, s] : volumes) Add(name, s);
}

std::shared_ptr<MediaModel> MediaTiming::Find(absl::string_view volume) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = models_.find(volume);
  return it == models_.end() ? nullptr : it->second;
}

void MediaTiming::Add(const std::string& volume, const MediaSettings& settings) {
  auto m = std::make_shared<MediaModel>();
  m->Set(settings);
  absl::MutexLock lock(&mu_);
  models_[volume] = std::move(m);
}

void MediaTiming::Remove(absl::string_view volume) {
  absl::MutexLock lock(&mu_);
  if (auto it = models_.find(volume); it != models_.end()) models_.erase(it);
}

}  // namespace gdr
