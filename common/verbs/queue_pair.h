// A send queue the daemon posts one-sided RDMA on, whatever created it: an RC QP
// (ibv_create_qp_ex) or an mlx5 DC initiator (mlx5dv_create_qp). Owns the ibv_qp, keeps the
// send-queue slot count, posts batches through the extended API (ibv_wr_start, ibv_wr_rdma_*,
// ibv_wr_set_sge, ibv_wr_complete) and drives state changes, including error recovery
// (reset -> init -> rtr -> rts). Transport-specific parts come in as parameters: the
// transition attributes, and a hook that sets a per-WR address (DC: mlx5dv_wr_set_dc_addr).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/verbs/verbs_ptr.h"

namespace gdr::verbs {

// A QP (or DCT) number as the wire may name one: 24 bits, and 0 is no QP.
constexpr bool IsQpNumber(uint32_t n) { return n != 0 && n <= 0xFFFFFF; }

enum class RdmaOp {
  kWrite,  // local -> remote
  kRead,   // remote -> local
};

// One work request. wr_id points at the CompletionHandler of its op (see completion_poller.h).
struct RdmaWr {
  uint64_t wr_id = 0;
  RdmaOp op = RdmaOp::kWrite;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t local_addr = 0;
  uint32_t lkey = 0;
  uint32_t length = 0;
};

// One ibv_modify_qp step.
struct QpTransition {
  ibv_qp_attr attr{};
  int mask = 0;
};

// RESET -> INIT on `port` with pkey index 0. QPs that are targets of remote access (RC, DCT)
// pass their IBV_ACCESS_* flags; a DCI passes nullopt, since mlx5 refuses access flags on one.
QpTransition InitTransition(uint8_t port, std::optional<int> remote_access);

class QueuePair {
 public:
  // Takes ownership of `qp`, which must have been created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS
  // including IBV_QP_EX_WITH_RDMA_WRITE and _READ and `sq_depth` send WRs. INVALID_ARGUMENT
  // when it has no ibv_qp_ex.
  static absl::StatusOr<std::unique_ptr<QueuePair>> Adopt(VerbsPtr<ibv_qp> qp, uint32_t sq_depth);

  ibv_qp* qp() const { return qp_.get(); }
  ibv_qp_ex* qpx() const { return qpx_; }
  uint32_t qp_num() const { return qp_->qp_num; }
  uint32_t sq_depth() const { return sq_depth_; }

  // Send-queue slots: reserve one per WR before Post, release one per completion (success or
  // not). Thread-safe.
  bool TryReserve(uint32_t n);
  void Release(uint32_t n);
  uint32_t outstanding() const { return outstanding_.load(std::memory_order_acquire); }

  // Posts `wrs` as one batch, every WR signaled. For DC, `set_address` is called after each
  // WR's opcode setter (e.g. mlx5dv_wr_set_dc_addr); RC passes nothing. Slots must have been
  // reserved; callers serialize Post on one QP. On error none of the batch was posted; the
  // errno status of ibv_wr_complete.
  absl::Status Post(std::span<const RdmaWr> wrs);
  absl::Status Post(std::span<const RdmaWr> wrs,
                    absl::FunctionRef<void(ibv_qp_ex*, const RdmaWr&)> set_address);

  // One state change; `step` names it in the error ("RTR").
  absl::Status Modify(const QpTransition& t, const char* step);
  // Applies `steps` in order (for example INIT, RTR, RTS).
  absl::Status BringUp(std::span<const QpTransition> steps);
  // RESET then `steps`: recovers a QP in ERR (or any state) without recreating it. Every WR
  // that was outstanding must have completed (flushed) before: the caller checks outstanding().
  absl::Status Recover(std::span<const QpTransition> steps);
  // Moves to ERR: every outstanding WR completes with IBV_WC_WR_FLUSH_ERR. Used before
  // destroying a QP so that no completion of it can arrive after its handlers are gone.
  absl::Status MoveToError();
  absl::StatusOr<ibv_qp_state> QueryState() const;

 private:
  QueuePair(VerbsPtr<ibv_qp> qp, ibv_qp_ex* qpx, uint32_t sq_depth)
      : qp_(std::move(qp)), qpx_(qpx), sq_depth_(sq_depth) {}
  VerbsPtr<ibv_qp> qp_;
  ibv_qp_ex* qpx_;
  const uint32_t sq_depth_;
  std::atomic<uint32_t> outstanding_{0};
};

}  // namespace gdr::verbs
