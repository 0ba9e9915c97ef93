// A thread that runs blocking work (msync of file-backed volumes for Read with sync=true) off
// the transport and gRPC threads, in submission order. Pending work runs before Shutdown returns,
// so nothing a client was promised is dropped at stop.
#pragma once

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace gdr {

class SyncWorker {
 public:
  SyncWorker();
  ~SyncWorker();  // Shutdown()
  // Queues `fn`; after Shutdown runs it on the caller's thread. Thread-safe.
  void Post(std::function<void()> fn);
  // Runs what is queued, then joins the thread. Idempotent.
  void Shutdown();

 private:
  void Loop();
  bool HasWorkOrStop() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gdr
