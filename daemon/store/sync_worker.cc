#include "daemon/store/sync_worker.h"

namespace gdr {

SyncWorker::SyncWorker() { thread_ = std::thread([this] { Loop(); }); }

SyncWorker::~SyncWorker() { Shutdown(); }

void SyncWorker::Post(std::function<void()> fn) {
  {
    absl::MutexLock lock(&mu_);
    if (!stop_) {
      queue_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

void SyncWorker::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

bool SyncWorker::HasWorkOrStop() const { return stop_ || !queue_.empty(); }

void SyncWorker::Loop() {
  for (;;) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &SyncWorker::HasWorkOrStop));
      if (queue_.empty()) return;  // stop_ and drained
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

}  // namespace gdr
