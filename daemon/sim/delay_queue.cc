#include "daemon/sim/delay_queue.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace gdr {

DelayQueue::DelayQueue() {
  beat_ns_.store(absl::GetCurrentTimeNanos());
  thread_ = std::thread([this] { Loop(); });
}

DelayQueue::~DelayQueue() { Shutdown(); }

DelayQueue::Handle DelayQueue::RunAt(absl::Time when, std::function<void()> fn) {
  {
    absl::MutexLock lock(&mu_);
    if (!stop_) {
      const Handle h = next_++;
      queued_.emplace(h, Queued{when, std::move(fn)});
      heap_.push(Entry{when, h});
      ++changes_;
      return h;
    }
  }
  fn();
  return 0;
}

bool DelayQueue::Advance(Handle handle, absl::Time when) {
  absl::MutexLock lock(&mu_);
  auto it = queued_.find(handle);
  if (it == queued_.end()) return false;
  if (when < it->second.when) {
    it->second.when = when;
    heap_.push(Entry{when, handle});
    ++changes_;
  }
  return true;
}

size_t DelayQueue::pending() const {
  absl::MutexLock lock(&mu_);
  return queued_.size();
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
      // Sleep until the earliest deadline, a new or advanced item, or stop; at most 100 ms so
      // the heartbeat keeps moving while idle.
      const absl::Time now = absl::Now();
      absl::Time wake = now + absl::Milliseconds(100);
      if (!heap_.empty()) wake = std::min(wake, heap_.top().when);
      const uint64_t seen = changes_;
      auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || changes_ != seen;
      };
      if (wake > now) mu_.AwaitWithDeadline(absl::Condition(&changed), wake);
      stopping = stop_;
      // What is due is judged on a reading taken after the wait, so a wait that returns early
      // (a spurious wake-up, timer slack) never runs a callback before its time.
      const absl::Time t = absl::Now();
      while (!heap_.empty() && (stopping || heap_.top().when <= t)) {
        const Entry e = heap_.top();
        heap_.pop();
        auto it = queued_.find(e.handle);
        if (it == queued_.end() || it->second.when != e.when) continue;  // left by an Advance
        due.push_back(std::move(it->second.fn));
        queued_.erase(it);
      }
    }
    beat_ns_.store(absl::GetCurrentTimeNanos());
    for (auto& fn : due) fn();
    if (stopping) return;
  }
}

}  // namespace gdr
