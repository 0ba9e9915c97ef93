// Runs callbacks at a time in the future on one thread (a deadline-ordered heap), so simulated
// media timing and stall faults can hold thousands of op completions without a thread or a
// blocked reactor per op. A queued callback can be brought forward (a cleared stall lets go of
// the ops it held). Also used as a liveness probe for the systemd watchdog.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <queue>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gdr {

class DelayQueue {
 public:
  // Names one queued callback; 0 names none (it ran on the caller's thread).
  using Handle = uint64_t;

  DelayQueue();   // starts the thread
  ~DelayQueue();  // Shutdown()

  // Runs `fn` on the queue's thread once absl::Now() (the wall clock absl::GetCurrentTimeNanos
  // reads) is at or past `when`, never earlier (right away when `when` has passed). After
  // Shutdown, runs `fn` on the calling thread at once and returns 0. Thread-safe; never blocks
  // on other callbacks. `fn` must not block: it runs on the one timer thread.
  Handle RunAt(absl::Time when, std::function<void()> fn);

  // Moves a queued callback's time to `when` if that is earlier (a callback that has run, or
  // handle 0, is left alone). Returns whether the callback was still queued. Thread-safe.
  bool Advance(Handle handle, absl::Time when);

  // Runs everything still queued now (early) and stops the thread. Idempotent.
  void Shutdown();

  // UNAVAILABLE when the thread has not come round within `max_stall` (it wakes at least every
  // 100 ms, so a longer silence means a callback is stuck).
  absl::Status CheckHealth(absl::Duration max_stall) const;
  size_t pending() const;

 private:
  // A heap entry. An Advance leaves the callback's old entry behind; when it comes up it finds
  // the callback gone or timed earlier than itself, and is dropped.
  struct Entry {
    absl::Time when;
    Handle handle;
    bool operator>(const Entry& o) const {
      return when != o.when ? when > o.when : handle > o.handle;
    }
  };
  struct Queued {
    absl::Time when;
    std::function<void()> fn;
  };
  void Loop();

  mutable absl::Mutex mu_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Handle, Queued> queued_ ABSL_GUARDED_BY(mu_);
  Handle next_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;  // wakes the thread: a new or advanced entry
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> beat_ns_{0};
  std::thread thread_;
};

}  // namespace gdr
