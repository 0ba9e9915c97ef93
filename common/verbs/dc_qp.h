// The dc-specific part of the verbs core (mlx5 direct verbs): probing a device for DC,
// creating DC initiators (DCIs, the daemon's side) and DC targets (DCTs, the client's side),
// and the state transitions each needs. Posting, polling and recovery are the transport-neutral
// QueuePair / CompletionPoller, exactly as for rc; only creation and addressing differ.
//
// Built with mlx5dv (GDR_HAVE_MLX5DV); without it every call answers UNIMPLEMENTED and the
// probe says the build lacks mlx5dv, so callers need no #ifdefs.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/verbs/queue_pair.h"
#include "common/verbs/verbs_device.h"
#include "common/verbs/verbs_ptr.h"

struct mlx5dv_qp_ex;

namespace gdr::verbs {

// True when this build has mlx5dv.
bool BuiltWithMlx5dv();

struct DcProbe {
  bool mlx5 = false;  // mlx5dv_is_supported()
  bool dc = false;    // a DCI could be created (the device and firmware do DC)
  std::string why_not;  // one line naming the missing capability when !mlx5 || !dc
  uint32_t max_qp = 0;
  uint32_t max_qp_wr = 0;
  uint8_t max_qp_init_rd_atom = 0;  // RDMA READs in flight per QP as initiator (RC's limit)
  // The DC limits (mlx5dv_query_device, MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM, rdma-core >= 47);
  // 0 when not reported. Kernels since 6.2 check a DCI's max_rd_atomic against the DC limit.
  uint8_t max_dc_init_rd_atom = 0;  // as a DC initiator
  uint8_t max_dc_rd_atom = 0;       // as a DC target
  // mlx5dv_query_device with MLX5DV_CONTEXT_MASK_DCI_STREAMS; 0 when not reported.
  uint8_t dci_streams_log_concurrent = 0;
  uint8_t dci_streams_log_errored = 0;
};

// Asks `device` what it offers for DC: mlx5dv_is_supported, ibv_query_device, mlx5dv_query_device
// (DCI streams), and finally a probe DCI created on `cq` and destroyed again, because no cap bit
// reports DC itself. Never fails: what is missing is in `why_not`.
DcProbe ProbeDc(const VerbsDevice& device, ibv_cq* cq);

struct DciConfig {
  uint32_t sq_depth = 128;
  uint8_t max_rd_atomic = 16;
  // Path MTU; unset: the port's active MTU. Must equal every DCT's (GetInfo advertises it).
  std::optional<ibv_mtu> path_mtu;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t log_streams = 0;  // 0: no DCI streams
  uint8_t log_errored = 0;
};

// A DC initiator: mlx5dv_create_qp with IBV_QPT_DRIVER / MLX5DV_DCTYPE_DCI, send ops RDMA WRITE
// and READ, both CQs on `cq`, and DCI streams when config.log_streams > 0. Not yet moved out of
// RESET. The errno status of mlx5dv_create_qp.
absl::StatusOr<std::unique_ptr<QueuePair>> CreateDci(const VerbsDevice& device, ibv_cq* cq,
                                                     const DciConfig& config);
// The DCI's mlx5dv_qp_ex (for mlx5dv_wr_set_dc_addr); nullptr without mlx5dv.
mlx5dv_qp_ex* DciEx(const QueuePair& dci);

// RESET -> INIT (pkey 0, port), INIT -> RTR (path MTU of the port, AV on the port with the GRH
// source GID index on RoCE), RTR -> RTS (timeout, retries, max_rd_atomic, sq_psn 0). A DCI has no
// fixed peer: the destination comes per work request.
std::vector<QpTransition> DciTransitions(const VerbsDevice& device, const DciConfig& config);
// The same from the port's attributes alone (what the device overload passes).
std::vector<QpTransition> DciTransitions(const PortInfo& port, const DciConfig& config);

// mlx5dv_dci_stream_id_reset: clears an errored stream once all its WRs have flushed.
absl::Status ResetDciStream(const QueuePair& dci, uint16_t stream);

// Sets the DC address of the WR just built on `dci` (mlx5dv_wr_set_dc_addr, or the _stream
// variant when `streams` is true).
void SetDcAddress(mlx5dv_qp_ex* mqp, ibv_ah* ah, uint32_t dct_number, uint64_t dc_key,
                  bool streams, uint16_t stream);

struct SrqDeleter {
  void operator()(ibv_srq* p) const;
};
using SrqPtr = std::unique_ptr<ibv_srq, SrqDeleter>;

// The DCT answers with its own address vector: READ responses and ACKs leave with its path
// MTU, traffic class and SL, so these must be the daemon's DCIs' (GetInfo's RdmaInfo.dc).
struct DctConfig {
  uint8_t min_rnr_timer = 12;
  int remote_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;   // GRH traffic class (RoCE: DSCP << 2 | ECN) of responses
  uint8_t service_level = 0;   // ah_attr.sl (RoCE: the PCP of responses; InfiniBand: the SL)
  std::optional<ibv_mtu> path_mtu;  // unset: the port's active MTU
};

// The DCT's path MTU: the smaller of this port's active MTU and the daemon's DCI path MTU
// (`daemon_mtu_bytes`, GetInfo; 0 from a daemon that does not say: the port's). A READ
// response's middle packets are exactly one path MTU, so both ends must use the same.
ibv_mtu DctPathMtu(ibv_mtu port_active, uint32_t daemon_mtu_bytes);

// A DC target for one client: an SRQ (DC targets receive through one; one-sided traffic posts
// none), then mlx5dv_create_qp with IBV_QPT_DRIVER / MLX5DV_DCTYPE_DCT and `dc_key`, taken to
// INIT (remote read/write access) and RTR, where a DCT stays. The errno status of the failing call.
struct DcTargetQp {
  SrqPtr srq;
  VerbsPtr<ibv_qp> dct;  // after the SRQ: destroyed first
  uint32_t dct_number = 0;
};
absl::StatusOr<DcTargetQp> CreateDct(const VerbsDevice& device, ibv_cq* cq, uint64_t dc_key,
                                     const DctConfig& config);
std::vector<QpTransition> DctTransitions(const VerbsDevice& device, const DctConfig& config);
// The same from the port's attributes alone (what the device overload passes).
std::vector<QpTransition> DctTransitions(const PortInfo& port, const DctConfig& config);

// A fresh random DC access key (getrandom), never 0.
absl::StatusOr<uint64_t> RandomDcKey();

}  // namespace gdr::verbs
