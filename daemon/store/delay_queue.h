// Runs callbacks at a time in the future on one thread (a deadline-ordered heap), so simulated
// media timing can hold thousands of op completions without a thread or a blocked reactor per
// op. Also used as a liveness probe for the systemd watchdog.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <queue>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gdr {

class DelayQueue {
 public:
  DelayQueue();   // starts the thread
  ~DelayQueue();  // Shutdown()

  // Runs `fn` at `when` on the queue's thread (right away, on that thread, when `when` has
  // passed). After Shutdown, runs `fn` on the calling thread at once. Thread-safe; never blocks
  // on other callbacks. `fn` must not block: it runs on the one timer thread.
  void RunAt(absl::Time when, std::function<void()> fn);

  // Runs everything still queued now (early) and stops the thread. Idempotent.
  void Shutdown();

  // UNAVAILABLE when the thread has not come round within `max_stall` (it wakes at least every
  // 100 ms, so a longer silence means a callback is stuck).
  absl::Status CheckHealth(absl::Duration max_stall) const;
  size_t pending() const;

 private:
  struct Item {
    absl::Time when;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Item& o) const { return when != o.when ? when > o.when : seq > o.seq; }
  };
  void Loop();

  mutable absl::Mutex mu_;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap_ ABSL_GUARDED_BY(mu_);
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> beat_ns_{0};
  std::thread thread_;
};

}  // namespace gdr
