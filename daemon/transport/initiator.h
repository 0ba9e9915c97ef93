// The initiator side of a transport: the daemon's half that moves bytes one-sidedly between
// store memory and a client's registered memory. tcp implements it now; rc and dc (verbs) plug
// in behind the same interface.
#pragma once

#include <functional>
#include <span>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/transport/transfer_op.h"

namespace gdr {

// Called exactly once per accepted op, from a transport thread, with OK or the failure.
using OpDone = std::function<void(absl::Status)>;

// One op of a batch handed to Initiator::SubmitBatch.
struct Submission {
  TransferOp op;
  OpDone done;
  // Set by SubmitBatch: OK when the op started (`done` will run exactly once), otherwise why
  // it was refused (nothing started, `done` will not run).
  absl::Status status;
};

class Initiator {
 public:
  virtual ~Initiator() = default;
  // Starts moving `op`. Never blocks on I/O. On a non-OK return (e.g. RESOURCE_EXHAUSTED when
  // the pool is full) nothing was started and `done` is not called. Thread-safe.
  virtual absl::Status Submit(const TransferOp& op, OpDone done) = 0;
  // Starts every op of `batch` and sets each one's `status` as Submit would return it. Ops to
  // the same destination may share one doorbell / one system call, which is why callers with
  // several ops at hand (a Stream message) should prefer it. The default submits one by one.
  // Thread-safe.
  virtual void SubmitBatch(std::span<Submission> batch) {
    for (Submission& s : batch) s.status = Submit(s.op, std::move(s.done));
  }
  // Fails everything queued or in flight with CANCELLED and stops. Idempotent.
  virtual void Shutdown() = 0;
  // Liveness of the completion path for systemd's watchdog: OK when the transport's polling /
  // housekeeping thread has run within `max_stall`; otherwise a status saying what is stuck.
  virtual absl::Status CheckHealth(absl::Duration max_stall) const { return absl::OkStatus(); }
};

}  // namespace gdr
