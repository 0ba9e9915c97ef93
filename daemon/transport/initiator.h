// The initiator side of a transport: the daemon's half that moves bytes one-sidedly between
// store memory and a client's registered memory. tcp, rc and dc each implement it; the daemon
// holds them in a TransportSet and never looks behind this interface after start-up.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/transport/transfer_op.h"

namespace gdrstore::v1 {
class GetInfoResponse;
class RemoteBuffer;
}

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

// A transport's pool and its clients, in the same terms for every transport (GetStats, the
// systemd STATUS line, logs).
struct InitiatorStats {
  uint32_t in_use = 0;      // links (tcp), QPs (rc), ready DCIs (dc)
  uint32_t capacity = 0;    // the most the pool may hold
  uint32_t clients = 0;     // tcp destinations with links, rc connections, dc destinations busy
  uint64_t in_flight = 0;   // ops started and not yet done
  uint64_t errors = 0;      // transport failures: links (tcp), QP errors (rc), DCI errors (dc)
  uint64_t recoveries = 0;  // QPs / DCIs / streams brought back after an error
  uint64_t waiting = 0;     // ops taken but waiting for a pool resource (tcp: a link)
  uint64_t handovers = 0;   // links / DCIs moved to another destination that waited for one
};

class Initiator {
 public:
  virtual ~Initiator() = default;
  virtual TransportKind kind() const = 0;
  // Reads and checks this transport's endpoint of a request's buffer (ValidateOp has checked
  // the rest, and that the endpoint is of this kind()) into the destination its ops carry.
  // INVALID_ARGUMENT naming the field (never quoting a secret). Thread-safe; no I/O.
  virtual absl::StatusOr<std::shared_ptr<const Destination>> ParseDestination(
      const gdrstore::v1::RemoteBuffer& buffer) const = 0;
  // Starts moving `op`, or takes it to start once the pool has room (a pool serves more
  // destinations than it holds by scheduling, never by refusing). Never blocks on I/O. On a
  // non-OK return nothing was started and `done` is not called. Thread-safe.
  virtual absl::Status Submit(const TransferOp& op, OpDone done) = 0;
  // Starts every op of `batch` and sets each one's `status` as Submit would return it. Ops to
  // the same destination may share one doorbell / one system call, which is why callers with
  // several ops at hand (a Stream message) should prefer it. The default submits one by one.
  // Thread-safe.
  virtual void SubmitBatch(std::span<Submission> batch) {
    for (Submission& s : batch) s.status = Submit(s.op, std::move(s.done));
  }
  // Liveness of the completion path for systemd's watchdog: OK when the transport's polling /
  // housekeeping thread has run within `max_stall`; otherwise a status saying what is stuck.
  virtual absl::Status CheckHealth(absl::Duration max_stall) const { return absl::OkStatus(); }
  // The daemon is stopping: refuse new clients (e.g. rc Connect calls) and let idle ones go;
  // ops already started run on. The default has nothing to refuse.
  virtual void StartDrain() {}
  // Fails everything queued or in flight with CANCELLED and stops. Idempotent.
  virtual void Shutdown() = 0;
  virtual InitiatorStats stats() const = 0;
  // GetInfo's one line for this transport: what runs (device, pool size).
  virtual std::string Describe() const = 0;
  // The transport's own parts of GetInfo beyond its line (rc: its QP figures). Default: none.
  virtual void FillInfo(gdrstore::v1::GetInfoResponse* info) const {}
  // The transport's own parts of GetStats beyond its pool, added to the page laid out before
  // (local: each listed volume's page-locked bytes). Default: none.
  virtual void FillStats(gdrstore::v1::GetStatsResponse* stats) const {}
};

}  // namespace gdr
