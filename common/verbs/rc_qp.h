// The rc-specific part of the verbs core: creating a reliable-connected QP and the attributes
// that connect it to one peer QP (INIT -> RTR -> RTS). Everything else (posting, polling,
// recovery) is the transport-neutral QueuePair / CompletionPoller.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/verbs/gid_table.h"
#include "common/verbs/queue_pair.h"
#include "common/verbs/verbs_device.h"

namespace gdr::verbs {

// What one side tells the other to connect an RC QP pair.
struct RcPeer {
  uint32_t qp_num = 0;
  uint32_t psn = 0;  // the first PSN this side sends with (24 bits)
  Gid gid{};
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;  // the side's active MTU
  uint8_t rd_atomic = 1;       // RDMA READs the side accepts in flight as a responder
};

struct RcQpConfig {
  uint32_t sq_depth = 128;     // send WRs; 1 for a passive QP
  uint8_t max_rd_atomic = 16;  // RDMA READs in flight as an initiator (capped by the peer's)
  uint8_t max_dest_rd_atomic = 16;  // RDMA READs accepted in flight as a responder
  uint8_t timeout = 14;        // 4.096 us * 2^timeout per try
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  int remote_access = 0;       // IBV_ACCESS_REMOTE_* the QP accepts (passive side)
  // The address vector's class: what every packet this QP sends carries (requests on the
  // daemon, READ responses and ACKs on the client). Both ends use the daemon's (RcAccept).
  uint8_t traffic_class = 0;   // GRH traffic class (RoCE: DSCP << 2 | ECN)
  uint8_t service_level = 0;   // ah_attr.sl (RoCE: PCP; InfiniBand: SL)
};

// ibv_create_qp_ex of an RC QP on `device`'s PD with both queues on `cq` and the extended send
// API (RDMA WRITE and READ). The errno status of ibv_create_qp_ex.
absl::StatusOr<std::unique_ptr<QueuePair>> CreateRcQp(const VerbsDevice& device, ibv_cq* cq,
                                                      const RcQpConfig& config);

// INIT, RTR, RTS towards `remote`, sending from `local_psn`. Path MTU is the smaller of the two
// sides' MTUs; RDMA READs in flight the smaller of ours and what the peer accepts.
std::vector<QpTransition> RcTransitions(const VerbsDevice& device, const RcQpConfig& config,
                                        uint32_t local_psn, const RcPeer& remote);
// The same from the port's and device's attributes alone (what the device overload passes).
std::vector<QpTransition> RcTransitions(const PortInfo& port, const ibv_device_attr& attr,
                                        const RcQpConfig& config, uint32_t local_psn,
                                        const RcPeer& remote);

// A random 24-bit starting PSN.
uint32_t RandomPsn();

// This side's description of `qp` (GID, LID, MTU of `device`).
RcPeer LocalRcPeer(const VerbsDevice& device, const QueuePair& qp, uint32_t psn,
                   const RcQpConfig& config);

}  // namespace gdr::verbs
