#include "common/verbs/queue_pair.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/verbs/verbs_status.h"
#include "common/base/status_macros.h"

namespace gdr::verbs {

QpTransition InitTransition(uint8_t port, std::optional<int> remote_access) {
  QpTransition init;
  init.attr.qp_state = IBV_QPS_INIT;
  init.attr.pkey_index = 0;
  init.attr.port_num = port;
  init.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (remote_access) {
    init.attr.qp_access_flags = static_cast<unsigned>(*remote_access);
    init.mask |= IBV_QP_ACCESS_FLAGS;
  }
  return init;
}

absl::StatusOr<std::unique_ptr<QueuePair>> QueuePair::Adopt(VerbsPtr<ibv_qp> qp,
                                                           uint32_t sq_depth) {
  if (!qp) return absl::InvalidArgumentError("no QP to adopt");
  if (sq_depth == 0) return absl::InvalidArgumentError("send queue depth must be > 0");
  ibv_qp_ex* qpx = ibv_qp_to_qp_ex(qp.get());
  if (qpx == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "QP ", qp->qp_num, " was not created with the extended send API (send_ops_flags)"));
  }
  return std::unique_ptr<QueuePair>(new QueuePair(std::move(qp), qpx, sq_depth));
}

bool QueuePair::TryReserve(uint32_t n) {
  uint32_t cur = outstanding_.load(std::memory_order_relaxed);
  do {
    if (cur + n > sq_depth_) return false;
  } while (!outstanding_.compare_exchange_weak(cur, cur + n, std::memory_order_acq_rel));
  return true;
}

void QueuePair::Release(uint32_t n) { outstanding_.fetch_sub(n, std::memory_order_acq_rel); }

absl::Status QueuePair::Post(std::span<const RdmaWr> wrs) {
  return Post(wrs, [](ibv_qp_ex*, const RdmaWr&) {});
}

absl::Status QueuePair::Post(std::span<const RdmaWr> wrs,
                             absl::FunctionRef<void(ibv_qp_ex*, const RdmaWr&)> set_address) {
  if (wrs.empty()) return absl::OkStatus();
  ibv_wr_start(qpx_);
  for (const RdmaWr& wr : wrs) {
    qpx_->wr_id = wr.wr_id;
    qpx_->wr_flags = IBV_SEND_SIGNALED;
    switch (wr.op) {
      case RdmaOp::kWrite:
        ibv_wr_rdma_write(qpx_, wr.rkey, wr.remote_addr);
        break;
      case RdmaOp::kRead:
        ibv_wr_rdma_read(qpx_, wr.rkey, wr.remote_addr);
        break;
    }
    set_address(qpx_, wr);
    ibv_wr_set_sge(qpx_, wr.lkey, wr.local_addr, wr.length);
  }
  const int rc = ibv_wr_complete(qpx_);
  if (rc != 0) {
    return VerbsError(rc, "ibv_wr_complete",
                      absl::StrCat("(QP ", qp_num(), ", ", wrs.size(), " work requests)"));
  }
  return absl::OkStatus();
}

absl::Status QueuePair::Modify(const QpTransition& t, const char* step) {
  ibv_qp_attr attr = t.attr;
  const int rc = ibv_modify_qp(qp_.get(), &attr, t.mask);
  if (rc != 0) {
    return VerbsError(rc > 0 ? rc : errno, "ibv_modify_qp",
                      absl::StrCat("QP ", qp_num(), " to ", step));
  }
  return absl::OkStatus();
}

absl::Status QueuePair::BringUp(std::span<const QpTransition> steps) {
  for (const QpTransition& t : steps) {
    const char* step = (t.mask & IBV_QP_STATE) ? QpStateName(t.attr.qp_state) : "(attributes)";
    GDR_RETURN_IF_ERROR(Modify(t, step));
  }
  return absl::OkStatus();
}

absl::Status QueuePair::Recover(std::span<const QpTransition> steps) {
  QpTransition reset;
  reset.attr.qp_state = IBV_QPS_RESET;
  reset.mask = IBV_QP_STATE;
  GDR_RETURN_IF_ERROR(Modify(reset, "RESET"));
  return BringUp(steps);
}

absl::Status QueuePair::MoveToError() {
  QpTransition err;
  err.attr.qp_state = IBV_QPS_ERR;
  err.mask = IBV_QP_STATE;
  return Modify(err, "ERR");
}

absl::StatusOr<ibv_qp_state> QueuePair::QueryState() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  const int rc = ibv_query_qp(qp_.get(), &attr, IBV_QP_STATE, &init);
  if (rc != 0) return VerbsError(rc > 0 ? rc : errno, "ibv_query_qp");
  return attr.qp_state;
}

}  // namespace gdr::verbs
