// The outgoing side of a gRPC callback bidi reactor: messages queue while a write is
// outstanding and leave in order, one write at a time, and the call's write side ends (Finish,
// WritesDone) exactly once, after the last write. Shared by the client's and the daemon's
// reactors so that each of them states only what a write carries and how the call ends.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <utility>

namespace gdr {

// Not thread-safe by itself: it takes no lock, because its owner already holds one around
// every reaction. Call every member with that one lock held. `start_write` and `end` run
// inside Push, Flush, OnWriteDone, EndWhenDrained and Discard, still under the lock: they may
// start gRPC operations (StartWrite, Finish and StartWritesDone never react inline) but must
// not call back into the queue.
template <class Item>
class WriteQueue {
 public:
  // Starts exactly one write carrying the first n >= 1 items of `queue` (never empty here) and
  // returns n; one item per message, or several packed into one. It may move from those n
  // items, which stay in place (and so at a stable address) until the write completes and are
  // popped then; it must not add or remove items.
  using StartWrite = std::function<size_t(std::deque<Item>& queue)>;
  // Ends the write side (a server's Finish, a client's WritesDone). `all_written`: every item
  // queued went out; false after a failed write or Discard, when a client has nothing to end.
  using End = std::function<void(bool all_written)>;

  WriteQueue(StartWrite start_write, End end)
      : start_write_(std::move(start_write)), end_(std::move(end)) {}
  WriteQueue(const WriteQueue&) = delete;
  WriteQueue& operator=(const WriteQueue&) = delete;

  // Queues `item` without starting a write, for a burst of items that one Flush sends
  // together. false, and `item` dropped, once the queue was discarded or has ended.
  bool Enqueue(Item item) {
    if (discarded_ || ended_) return false;
    queue_.push_back(std::move(item));
    return true;
  }

  // Enqueue, then Flush.
  bool Push(Item item) {
    if (!Enqueue(std::move(item))) return false;
    Flush();
    return true;
  }

  // Starts the next write unless one is outstanding, or runs the end action once it is due.
  void Flush() {
    if (writing_ || ended_) return;
    if (!discarded_ && !queue_.empty()) {
      writing_ = true;
      in_write_ = start_write_(queue_);
      return;
    }
    if (ending_) {
      ended_ = true;
      end_(!discarded_);
    }
  }

  // For the reactor's OnWriteDone. Pops what the write carried; a failed write means the call
  // is over, so the rest is discarded (see Discard). Then Flush.
  void OnWriteDone(bool ok) {
    writing_ = false;
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(in_write_));
    in_write_ = 0;
    if (!ok) Drop();
    Flush();
  }

  // The end action runs once everything queued has been written; items queued until then
  // still go out first. Idempotent.
  void EndWhenDrained() {
    if (ending_) return;
    ending_ = true;
    Flush();
  }

  // Drops the items not yet in a write and every item queued from now on; starts no write
  // again. A write already outstanding completes (its items stay alive until then). The end
  // action, once asked for, runs with all_written = false.
  void Discard() {
    Drop();
    Flush();
  }

  bool writing() const { return writing_; }
  bool ending() const { return ending_; }  // EndWhenDrained was called
  bool discarded() const { return discarded_; }
  bool ended() const { return ended_; }  // the end action has run
  // Items not yet carried by a write.
  size_t queued() const { return queue_.size() - in_write_; }

 private:
  void Drop() {
    discarded_ = true;
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(in_write_), queue_.end());
  }

  const StartWrite start_write_;
  const End end_;
  std::deque<Item> queue_;  // the items of the outstanding write first, then the unsent ones
  size_t in_write_ = 0;     // items at the front carried by the outstanding write
  bool writing_ = false;
  bool ending_ = false;
  bool discarded_ = false;
  bool ended_ = false;
};

}  // namespace gdr
