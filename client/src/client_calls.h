// What of a Client may outlive it: its Streams (an OpStream closed or destroyed after the
// Client), its unary calls in flight (an op whose future is kept past the Client), and code that
// reaches the Client later on their behalf (an op the window sends once it has room, a slice
// resent on another rail). The Client ends them before it goes: Close refuses new uses of the
// Client, cancels every call and waits until no code uses the Client any more, so that what
// runs afterwards fails instead of touching freed memory.
#pragma once

#include <grpcpp/client_context.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace gdr {

class ClientCalls {
 public:
  // A Stream of the Client, ended when the Client closes. Held weakly: a Stream destroyed
  // first is simply passed over.
  class Stream {
   public:
    virtual ~Stream() = default;
    // The Client is closing: the call is cancelled (its ops in flight fail CANCELLED). Called
    // once, with no lock of this registry held.
    virtual void CancelForClientClose() = 0;
    // Called once no code uses the Client any more: lets go of what the Client owns (its
    // timer) and returns once the call has ended, every op on it answered.
    virtual void AwaitEndForClientClose() = 0;
  };

  // A use of the Client by code that may run after it is gone: while any is held, Close waits.
  // Empty (false) once Close has begun; the code then fails its op instead. Uses nest. Never
  // destroy the Client from inside a use (an op's callback run synchronously): Close would wait
  // for the use it is called from.
  class Use {
   public:
    explicit Use(ClientCalls& calls) : calls_(calls), held_(calls.Enter()) {}
    ~Use() {
      if (held_) calls_.Leave();
    }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    explicit operator bool() const { return held_; }

   private:
    ClientCalls& calls_;
    const bool held_;
  };

  // False once Close has begun (the Stream is not counted; the caller ends it).
  bool AddStream(std::weak_ptr<Stream> stream) ABSL_LOCKS_EXCLUDED(mu_);
  // A unary call about to start: its context is cancelled by Close. False once Close has begun:
  // the caller does not start the call. `ctx` is held weakly (alive while it is cancelled).
  bool AddUnary(const std::shared_ptr<grpc::ClientContext>& ctx) ABSL_LOCKS_EXCLUDED(mu_);
  // The call has answered.
  void RemoveUnary(const grpc::ClientContext* ctx) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends everything, once (later calls return at once): refuses new uses, calls and Streams;
  // cancels every Stream and unary call; waits until no use is held; then waits for each
  // Stream's call to end. Unary calls are cancelled, not waited for: what their answers run
  // holds what it needs.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool Enter();
  void Leave();

  // Uses held, and whether Close has begun: atomics, so that an op takes no lock here.
  std::atomic<int64_t> uses_{0};
  std::atomic<bool> closing_{false};
  absl::Mutex mu_;  // Close waits under it; a last Leave wakes it by taking it
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::weak_ptr<Stream>> streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<const grpc::ClientContext*, std::weak_ptr<grpc::ClientContext>> unary_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace gdr
