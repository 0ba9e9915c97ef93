#include "daemon/store/delay_queue.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace gdr {

DelayQueue::DelayQueue() {
  beat_ns_.store(absl::GetCurrentTimeNanos());
  thread_ = std::thread([this] { Loop(); });
}

DelayQueue::~DelayQueue() { Shutdown(); }

void DelayQueue::RunAt(absl::Time when, std::function<void()> fn) {
  {
    absl::MutexLock lock(&mu_);
    if (!stop_) {
      heap_.push(Item{when, seq_++, std::move(fn)});
      return;
    }
  }
  fn();
}

size_t DelayQueue::pending() const {
  absl::MutexLock lock(&mu_);
  return heap_.size();
}

void DelayQueue::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status DelayQueue::CheckHealth(absl::Duration max_stall) const {
  const absl::Duration age = absl::Nanoseconds(absl::GetCurrentTimeNanos() - beat_ns_.load());
  if (age > max_stall) {
    return absl::UnavailableError(absl::StrCat("media-timing delay thread has not come round for ",
                                               absl::FormatDuration(age)));
  }
  return absl::OkStatus();
}

void DelayQueue::Loop() {
  for (;;) {
    std::vector<std::function<void()>> due;
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      // Sleep until the earliest deadline, a new item, or stop; at most 100 ms so the
      // heartbeat keeps moving while idle.
      const absl::Time now = absl::Now();
      absl::Time wake = now + absl::Milliseconds(100);
      if (!heap_.empty()) wake = std::min(wake, heap_.top().when);
      const uint64_t seen = seq_;
      auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || seq_ != seen;
      };
      if (wake > now) mu_.AwaitWithDeadline(absl::Condition(&changed), wake);
      stopping = stop_;
      const absl::Time t = absl::Now();
      while (!heap_.empty() && (stopping || heap_.top().when <= t)) {
        // priority_queue::top is const; the item is popped right after, so moving is safe.
        due.push_back(std::move(const_cast<Item&>(heap_.top()).fn));
        heap_.pop();
      }
    }
    beat_ns_.store(absl::GetCurrentTimeNanos());
    for (auto& fn : due) fn();
    if (stopping) return;
  }
}

}  // namespace gdr
