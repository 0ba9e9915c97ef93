#include "common/verbs/rc_qp.h"

#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/verbs/verbs_status.h"

namespace gdr::verbs {

absl::StatusOr<std::unique_ptr<QueuePair>> CreateRcQp(const VerbsDevice& device, ibv_cq* cq,
                                                      const RcQpConfig& config) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_RC;
  a.send_cq = cq;
  a.recv_cq = cq;
  a.cap.max_send_wr = config.sq_depth;
  a.cap.max_recv_wr = 1;  // no receives are posted; one-sided only
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  a.sq_sig_all = 0;
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  a.pd = device.pd();
  a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ;
  VerbsPtr<ibv_qp> qp(ibv_create_qp_ex(device.context(), &a));
  if (!qp) {
    return VerbsError(errno, "ibv_create_qp_ex",
                      absl::StrCat("(RC, ", config.sq_depth, " send WRs, on ", device.name(), ")"));
  }
  return QueuePair::Adopt(std::move(qp), config.sq_depth);
}

std::vector<QpTransition> RcTransitions(const VerbsDevice& device, const RcQpConfig& config,
                                        uint32_t local_psn, const RcPeer& remote) {
  return RcTransitions(device.port(), device.attr(), config, local_psn, remote);
}

std::vector<QpTransition> RcTransitions(const PortInfo& port, const ibv_device_attr& attr,
                                        const RcQpConfig& config, uint32_t local_psn,
                                        const RcPeer& remote) {
  const uint8_t dev_rd =
      static_cast<uint8_t>(std::min<int>(255, std::max(1, attr.max_qp_rd_atom)));
  const uint8_t dev_init_rd =
      static_cast<uint8_t>(std::min<int>(255, std::max(1, attr.max_qp_init_rd_atom)));
  std::vector<QpTransition> steps(3);
  steps[0] = InitTransition(port.port, config.remote_access);

  QpTransition& rtr = steps[1];
  rtr.attr.qp_state = IBV_QPS_RTR;
  rtr.attr.path_mtu = std::min(port.active_mtu, remote.mtu);
  rtr.attr.dest_qp_num = remote.qp_num;
  rtr.attr.rq_psn = remote.psn & 0xffffff;
  rtr.attr.max_dest_rd_atomic = std::max<uint8_t>(1, std::min(config.max_dest_rd_atomic, dev_rd));
  rtr.attr.min_rnr_timer = 12;
  rtr.attr.ah_attr.port_num = port.port;
  rtr.attr.ah_attr.sl = config.service_level;
  if (port.link_layer == IBV_LINK_LAYER_ETHERNET) {
    rtr.attr.ah_attr.is_global = 1;
    std::memcpy(rtr.attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    rtr.attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid_index);
    rtr.attr.ah_attr.grh.hop_limit = 64;
    rtr.attr.ah_attr.grh.traffic_class = config.traffic_class;
  } else {
    rtr.attr.ah_attr.dlid = remote.lid;
  }
  rtr.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;

  QpTransition& rts = steps[2];
  rts.attr.qp_state = IBV_QPS_RTS;
  rts.attr.timeout = config.timeout;
  rts.attr.retry_cnt = config.retry_cnt;
  rts.attr.rnr_retry = config.rnr_retry;
  rts.attr.sq_psn = local_psn & 0xffffff;
  rts.attr.max_rd_atomic = std::max<uint8_t>(
      1, std::min({config.max_rd_atomic, remote.rd_atomic, dev_init_rd}));
  rts.mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
             IBV_QP_MAX_QP_RD_ATOMIC;
  return steps;
}

uint32_t RandomPsn() {
  static thread_local std::mt19937 rng(std::random_device{}());
  return rng() & 0xffffff;
}

RcPeer LocalRcPeer(const VerbsDevice& device, const QueuePair& qp, uint32_t psn,
                   const RcQpConfig& config) {
  RcPeer p;
  p.qp_num = qp.qp_num();
  p.psn = psn;
  p.gid = device.port().gid;
  p.lid = device.port().lid;
  p.mtu = device.port().active_mtu;
  p.rd_atomic = static_cast<uint8_t>(std::max<int>(
      1, std::min<int>(config.max_dest_rd_atomic, device.attr().max_qp_rd_atom)));
  return p;
}

}  // namespace gdr::verbs
