// The tcp target's pinned staging pipes, kept per GPU across daemon links: a link takes one when
// it first touches a GPU region and gives it back when it ends, and the first registration of
// memory on a GPU makes the pipes its links will take. Making them inside a link's first frame
// put cuMemHostAlloc and stream creation (16 links x 4 slots, serialised by the driver) in the
// middle of the first bulk write: on an H200 host 8 clients writing 2 GiB each into GPU memory
// got 18.7 GB/s, and 25.3 once 8 GiB each spread that cost (issue 45). Thread-safe.
// Header-only so that the bookkeeping is tested with a fake pipe (Pipe: int ordinal() const).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gdr {

template <class Pipe>
class StagingPool {
 public:
  using Make = std::function<absl::StatusOr<std::unique_ptr<Pipe>>(int ordinal)>;
  explicit StagingPool(Make make) : make_(std::move(make)) {}

  // A pipe for GPU `ordinal`: an idle one, else a new one (its error when none can be made).
  absl::StatusOr<std::unique_ptr<Pipe>> Take(int ordinal) {
    {
      absl::MutexLock lock(&mu_);
      std::vector<std::unique_ptr<Pipe>>& idle = idle_[ordinal];
      if (!idle.empty()) {
        std::unique_ptr<Pipe> p = std::move(idle.back());
        idle.pop_back();
        return p;
      }
    }
    return make_(ordinal);  // outside the lock: the driver may take milliseconds
  }

  // Back from a link that ended, its copies done (the caller synced it).
  void Give(std::unique_ptr<Pipe> pipe) {
    if (pipe == nullptr) return;
    absl::MutexLock lock(&mu_);
    idle_[pipe->ordinal()].push_back(std::move(pipe));
  }

  // Makes idle pipes for `ordinal` until `count` have been made for it in all (idle or taken);
  // the first error stops it (the links make theirs when they need them, as before).
  absl::Status Prewarm(int ordinal, size_t count) {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        if (made_[ordinal] >= count) return absl::OkStatus();
        ++made_[ordinal];  // claimed, so concurrent registrations make `count`, not more
      }
      absl::StatusOr<std::unique_ptr<Pipe>> p = make_(ordinal);
      absl::MutexLock lock(&mu_);
      if (!p.ok()) {
        --made_[ordinal];
        return p.status();
      }
      idle_[ordinal].push_back(*std::move(p));
    }
  }

  size_t idle(int ordinal) const {
    absl::MutexLock lock(&mu_);
    auto it = idle_.find(ordinal);
    return it == idle_.end() ? 0 : it->second.size();
  }

 private:
  const Make make_;
  mutable absl::Mutex mu_;
  std::map<int, std::vector<std::unique_ptr<Pipe>>> idle_ ABSL_GUARDED_BY(mu_);
  std::map<int, size_t> made_ ABSL_GUARDED_BY(mu_);  // by Prewarm
};

}  // namespace gdr
