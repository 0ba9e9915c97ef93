#include "bench/chained_calls.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace gdrbench {

absl::StatusOr<std::vector<uint64_t>> ChainedCalls(
    uint64_t ops, const std::function<void(std::function<void(absl::Status)>)>& call) {
  using Clock = std::chrono::steady_clock;
  std::vector<uint64_t> latency_ns;
  latency_ns.reserve(ops);
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  absl::Status error;
  std::function<void()> issue = [&] {
    const Clock::time_point start = Clock::now();
    call([&, start](absl::Status st) {
      latency_ns.push_back(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count()));
      if (st.ok() && latency_ns.size() < ops) {
        issue();
        return;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (!st.ok()) error = st;
      finished = true;
      cv.notify_all();
    });
  };
  issue();
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return finished; });
  if (!error.ok()) return error;
  return latency_ns;
}

}  // namespace gdrbench
