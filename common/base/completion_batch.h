// Coalescing of per-completion follow-up work. A thread that delivers many completions in a
// burst (a link receiver draining its buffer, a CQ poller handling a batch of CQEs, a stream's
// read callback running each answer's callback) opens a CompletionBatch around the burst.
// Code reached from inside it that would otherwise act once per completion (start a gRPC
// write carrying one answer) calls Defer() instead, keyed by its object, and acts once when the
// batch closes, so one message carries the whole burst. Outside a batch Defer() returns false
// and the caller acts at once, as before.
#pragma once

#include <functional>
#include <vector>

namespace gdr {

class CompletionBatch {
 public:
  // Opens a batch on this thread; a batch opened inside another adds nothing (the outer one
  // runs everything).
  CompletionBatch();
  // Runs the deferred work, in the order first deferred, on this thread.
  ~CompletionBatch();
  CompletionBatch(const CompletionBatch&) = delete;
  CompletionBatch& operator=(const CompletionBatch&) = delete;

  // When a batch is open on this thread: queues `flush` unless work with the same `key` is
  // already queued (the first one wins), and returns true. Otherwise returns false and drops
  // `flush`. `key` must stay valid until the batch closes; the caller keeps it alive by
  // holding state (queued answers) that stops it from being destroyed before its flush.
  static bool Defer(const void* key, std::function<void()> flush);

  // Whether a batch is open on this thread.
  static bool Open();

 private:
  struct Item {
    const void* key;
    std::function<void()> flush;
  };
  bool outermost_;
  std::vector<Item> items_;
};

}  // namespace gdr
