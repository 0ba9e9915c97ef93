#include "client/src/deadline_timer.h"

namespace gdr {

DeadlineTimer::~DeadlineTimer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

DeadlineTimer::Id DeadlineTimer::Schedule(absl::Time when, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  const Id id = next_id_++;
  due_.emplace(std::make_pair(when, id), std::move(fn));
  when_.emplace(id, when);
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { Run(); });
    thread_id_ = thread_.get_id();
  }
  return id;
}

void DeadlineTimer::Cancel(Id id) {
  absl::MutexLock lock(&mu_);
  if (auto it = when_.find(id); it != when_.end()) {
    due_.erase(std::make_pair(it->second, id));
    when_.erase(it);
    return;
  }
  if (std::this_thread::get_id() == thread_id_) return;
  auto finished = [this, id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ != id; };
  mu_.Await(absl::Condition(&finished));
}

void DeadlineTimer::Run() {
  absl::MutexLock lock(&mu_);
  while (true) {
    // Wakes for a stop, or when an earlier entry than the one waited for arrives.
    const absl::Time next = due_.empty() ? absl::InfiniteFuture() : due_.begin()->first.first;
    auto wake = [this, next]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || (!due_.empty() && due_.begin()->first.first < next);
    };
    if (next > absl::Now()) mu_.AwaitWithDeadline(absl::Condition(&wake), next);
    if (stop_) return;
    if (due_.empty() || due_.begin()->first.first > absl::Now()) continue;
    auto it = due_.begin();
    const Id id = it->first.second;
    std::function<void()> fn = std::move(it->second);
    due_.erase(it);
    when_.erase(id);
    running_ = id;
    mu_.Unlock();
    fn();
    fn = nullptr;  // what it holds is let go outside the lock
    mu_.Lock();
    running_ = 0;
  }
}

}  // namespace gdr
