// The initiator side of a transport: the daemon's half that moves bytes one-sidedly between
// store memory and a client's registered memory. tcp implements it now; rc and dc (verbs) plug
// in behind the same interface.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "daemon/transfer_op.h"

namespace gdr {

// Called exactly once per accepted op, from a transport thread, with OK or the failure.
using OpDone = std::function<void(absl::Status)>;

class Initiator {
 public:
  virtual ~Initiator() = default;
  // Starts moving `op`. Never blocks on I/O. On a non-OK return (e.g. RESOURCE_EXHAUSTED when
  // the pool is full) nothing was started and `done` is not called. Thread-safe.
  virtual absl::Status Submit(const TransferOp& op, OpDone done) = 0;
  // Fails everything queued or in flight with CANCELLED and stops. Idempotent.
  virtual void Shutdown() = 0;
};

}  // namespace gdr
