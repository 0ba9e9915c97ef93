// One thread per Client that runs callbacks at given times: the deadlines of ops held for room
// under the daemon's limits, of ops in flight on a Stream, and retries of ops the daemon did
// not admit. Nothing on an op's path waits for it; it only wakes what would otherwise wait
// without a deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gdr {

// An op's deadline as the public API states it (time_point::max(): none) and as absl has it.
inline absl::Time FromDeadline(std::chrono::system_clock::time_point t) {
  return t == std::chrono::system_clock::time_point::max() ? absl::InfiniteFuture()
                                                            : absl::FromChrono(t);
}
// Now + `timeout`, or time_point::max() for none (a timeout of zero): an op's deadline from
// ClientOptions::rpc_timeout.
inline std::chrono::system_clock::time_point DeadlineAfter(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return std::chrono::system_clock::time_point::max();
  return std::chrono::system_clock::now() + timeout;
}
inline std::chrono::system_clock::time_point ToDeadline(absl::Time t) {
  return t == absl::InfiniteFuture() ? std::chrono::system_clock::time_point::max()
                                     : absl::ToChronoTime(t);
}

class DeadlineTimer {
 public:
  using Id = uint64_t;
  DeadlineTimer() = default;
  // Stops the thread; callbacks not yet run are dropped (their owners cancel them first).
  ~DeadlineTimer();
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  // Runs `fn` on the timer's thread at `when` (at once if it has passed). The thread starts
  // with the first call. Thread-safe.
  Id Schedule(absl::Time when, std::function<void()> fn);
  // Drops `id` if it has not run. If it is running on another thread, waits until it has
  // finished, so that what it uses may be destroyed after Cancel returns; from the timer's own
  // thread (a callback cancelling itself or another), never waits. Thread-safe.
  void Cancel(Id id);

 private:
  void Run();

  absl::Mutex mu_;
  // Ordered by time, then by id (ids grow), so equal times run in scheduling order.
  std::map<std::pair<absl::Time, Id>, std::function<void()>> due_ ABSL_GUARDED_BY(mu_);
  std::map<Id, absl::Time> when_ ABSL_GUARDED_BY(mu_);
  Id next_id_ ABSL_GUARDED_BY(mu_) = 1;
  Id running_ ABSL_GUARDED_BY(mu_) = 0;  // the callback the thread is running now
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started once, under mu_
  std::thread::id thread_id_;
};

}  // namespace gdr
