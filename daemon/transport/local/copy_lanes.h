// Which queued copy a free copy thread takes: the local transport's copy threads are shared by
// every GPU (and host memory), and taking the queue's oldest piece left GPUs idle while others
// had several threads (8 threads over 4 GPUs in FIFO order: each GPU had none about a tenth of
// the time). A lane is a GPU ordinal, or -1 for host memory. No locking here: the caller holds
// its queue's lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>

#include "absl/container/flat_hash_map.h"

namespace gdr {

// Copies running per lane.
class CopyLanes {
 public:
  void Begin(int lane) { ++running_[lane]; }
  void End(int lane) {
    auto it = running_.find(lane);
    if (it != running_.end() && --it->second == 0) running_.erase(it);
  }
  uint32_t running(int lane) const {
    auto it = running_.find(lane);
    return it == running_.end() ? 0 : it->second;
  }

  // The index in `queue` of the oldest item (its lane: `lane_of(item)`) among the lanes with
  // the fewest copies running, looking at no more than `window` items (a long queue costs a
  // free thread no more than that); 0 for an empty queue. Order within a lane is kept.
  template <typename T, typename LaneOf>
  size_t Pick(const std::deque<T>& queue, LaneOf lane_of, size_t window = 256) const {
    size_t best = 0;
    uint32_t fewest = std::numeric_limits<uint32_t>::max();
    for (size_t i = 0; i < queue.size() && i < window; ++i) {
      const uint32_t n = running(lane_of(queue[i]));
      if (n < fewest) {
        best = i;
        fewest = n;
        if (n == 0) break;  // nobody copies on this lane: it cannot get better
      }
    }
    return best;
  }

 private:
  absl::flat_hash_map<int, uint32_t> running_;
};

}  // namespace gdr
