// One client's rc connection on the daemon: a few RC QPs connected to the client's passive QPs,
// the backlog of chunks waiting for send-queue and CQ slots, and the state machine that recovers
// a failed QP with the client (reset -> init here, RcResetQp to the client, RcQpReady back,
// rtr -> rts here) while the connection's other QPs, and every other client, keep working.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/verbs/completion_poller.h"
#include "common/verbs/queue_pair.h"
#include "common/verbs/rc_qp.h"
#include "common/verbs/verbs_device.h"
#include "daemon/transport/initiator.h"
#include "daemon/verbs_core/verbs_core.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

// The connection's way back to its client (the Connect call). Called with the connection's
// lock held: implementations must not call back into the connection.
class RcControl {
 public:
  virtual void SendResetQp(uint32_t index, uint32_t qp_number, uint32_t psn,
                           const std::string& reason) = 0;
  // Ends the Connect call with `status`.
  virtual void Fail(const absl::Status& status) = 0;

 protected:
  ~RcControl() = default;
};

struct RcConnectionConfig {
  verbs::RcQpConfig qp;
  uint64_t chunk_bytes = 1 << 20;  // already capped at the port's max message size
  uint32_t max_backlog = 8192;     // chunks waiting for slots
  int max_flush_retries = 3;       // re-posts of a chunk flushed by another op's failure
};

class RcConnection {
 public:
  // Validates `hello` (INVALID_ARGUMENT naming the field), creates `n_qps` QPs (<= hello's)
  // on `rail` (its device, its poller's CQ), connects them to the client's first `n_qps` QPs
  // and fills `accept`. `rail` must outlive the connection; every op of the connection is
  // counted on it.
  static absl::StatusOr<std::unique_ptr<RcConnection>> Create(
      uint64_t id, VerbsCore* rail, const RcConnectionConfig& config,
      const gdrstore::v1::RcHello& hello, uint32_t n_qps, gdrstore::v1::RcAccept* accept);
  ~RcConnection();

  // Static checks of a hello (sizes, ranges); INVALID_ARGUMENT naming the field.
  static absl::Status ValidateHello(const gdrstore::v1::RcHello& hello);

  uint64_t id() const { return id_; }
  VerbsCore* rail() const { return rail_; }
  uint32_t qp_count() const { return static_cast<uint32_t>(slots_.size()); }

  // Attaches (or with nullptr detaches) the Connect call. Thread-safe.
  void SetControl(RcControl* control);
  // Ends the attached Connect call with `status`, if one is attached.
  void FailControl(const absl::Status& status);

  // Splits `op` into chunks and posts what the slots allow; the rest waits in the backlog.
  // `done` runs once, on the poller thread or inside a later Submit/OnQpReady, with the op's
  // outcome as the rail counted it (VerbsCore::FinishOp). UNAVAILABLE naming the rail when it is
  // not serving (counted as refused), FAILED_PRECONDITION when the connection is closing,
  // RESOURCE_EXHAUSTED when the backlog is full.
  absl::Status Submit(const TransferOp& op, uint32_t lkey, OpDone done);

  // The client's RcQpReady (its new QP `qp_number`, sending from `psn`): INVALID_ARGUMENT for an
  // index out of range, a PSN above 24 bits or a QP number outside 1..0xFFFFFF,
  // FAILED_PRECONDITION when that QP is not waiting for one; the verbs error of RTR/RTS.
  absl::Status OnQpReady(uint32_t index, uint32_t qp_number, uint32_t psn);

  // Fails the backlog with `why`, flushes every QP; `on_closed` runs once no WR of the
  // connection is outstanding any more (possibly right away, on this thread). Idempotent.
  void Close(const absl::Status& why, std::function<void()> on_closed);

  // Fails every chunk still waiting in the backlog with the rail's NotServing status when the
  // rail is not serving, so that no op waits for a port to come back: the client moves it to
  // another rail. The housekeeping thread calls it; posting paths check the same. Thread-safe.
  void FailQueuedIfRailDown();

  // True when a QP has waited for the client's RcQpReady longer than `timeout` while its rail
  // served (time with the rail down does not count).
  bool ResetOverdue(absl::Time now, absl::Duration timeout);
  // Ops accepted and not yet finished.
  uint64_t ops_in_flight() const;
  // QPs that failed while the connection was open, and those brought back with the client.
  uint64_t qp_errors() const { return qp_errors_.load(std::memory_order_relaxed); }
  uint64_t qp_recoveries() const { return qp_recoveries_.load(std::memory_order_relaxed); }
  // QPs per state, for logs: "2 ready".
  std::string Summary() const;

 private:
  struct Op;
  struct Chunk;
  enum class SlotState { kReady, kDraining, kResetting, kDead };
  struct Slot {
    std::unique_ptr<verbs::QueuePair> qp;
    SlotState state = SlotState::kReady;
    uint32_t local_psn = 0;
    verbs::RcPeer remote;
    absl::Time reset_since;
    std::string reason;
  };
  using Finished = std::vector<std::pair<std::shared_ptr<Op>, absl::Status>>;

  RcConnection(uint64_t id, VerbsCore* rail, RcConnectionConfig config);
  void OnCompletion(Chunk* chunk, const ibv_wc& wc);
  void PumpLocked(Finished* fin) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkFailedLocked(uint32_t index, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An injected fault (TransferOp::inject): QP `index` goes to ERR as after a real error.
  void InjectQpErrorLocked(uint32_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeResetLocked(uint32_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `on_closed_` (outside the lock) when closing and nothing is outstanding.
  std::function<void()> TakeClosedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Finish(Finished* fin);

  const uint64_t id_;
  VerbsCore* const rail_;
  const verbs::VerbsDevice* device_;
  verbs::CompletionPoller* poller_;
  const RcConnectionConfig config_;
  mutable absl::Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<Chunk>> backlog_ ABSL_GUARDED_BY(mu_);
  uint32_t posted_ ABSL_GUARDED_BY(mu_) = 0;  // WRs outstanding on all QPs
  size_t next_slot_ ABSL_GUARDED_BY(mu_) = 0;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status close_status_ ABSL_GUARDED_BY(mu_);
  std::function<void()> on_closed_ ABSL_GUARDED_BY(mu_);
  RcControl* control_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::atomic<uint64_t> ops_in_flight_{0};
  std::atomic<uint64_t> qp_errors_{0};
  std::atomic<uint64_t> qp_recoveries_{0};
};

}  // namespace gdr
