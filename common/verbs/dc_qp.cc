#include "common/verbs/dc_qp.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/verbs/verbs_status.h"

#if GDR_HAVE_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

namespace gdr::verbs {

bool BuiltWithMlx5dv() { return GDR_HAVE_MLX5DV != 0; }

void SrqDeleter::operator()(ibv_srq* p) const {
  if (!p) return;
  const int rc = ibv_destroy_srq(p);
  if (rc != 0) {
    GDR_LOG(kError) << "ibv_destroy_srq failed: " << std::strerror(rc > 0 ? rc : errno)
                    << "; the SRQ leaks until the process exits";
  }
}

std::vector<QpTransition> DciTransitions(const VerbsDevice& device, const DciConfig& config) {
  return DciTransitions(device.port(), config);
}

std::vector<QpTransition> DciTransitions(const PortInfo& port, const DciConfig& config) {
  const bool roce = port.link_layer == IBV_LINK_LAYER_ETHERNET;
  std::vector<QpTransition> steps(3);
  steps[0] = InitTransition(port.port, std::nullopt);

  QpTransition& rtr = steps[1];
  rtr.attr.qp_state = IBV_QPS_RTR;
  rtr.attr.path_mtu = config.path_mtu.value_or(port.active_mtu);
  rtr.attr.ah_attr.port_num = port.port;
  if (roce) {
    // RoCE frames always carry a GRH; its source GID is the port's chosen RoCE v2 entry. The
    // destination GID comes with each WR's AH.
    rtr.attr.ah_attr.is_global = 1;
    rtr.attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid_index);
  }
  rtr.mask = IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV;

  QpTransition& rts = steps[2];
  rts.attr.qp_state = IBV_QPS_RTS;
  rts.attr.timeout = config.timeout;
  rts.attr.retry_cnt = config.retry_cnt;
  rts.attr.rnr_retry = config.rnr_retry;
  rts.attr.sq_psn = 0;
  rts.attr.max_rd_atomic = std::max<uint8_t>(1, config.max_rd_atomic);
  rts.mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
             IBV_QP_MAX_QP_RD_ATOMIC;
  return steps;
}

ibv_mtu DctPathMtu(ibv_mtu port_active, uint32_t daemon_mtu_bytes) {
  ibv_mtu daemon;
  if (daemon_mtu_bytes == 0 || !MtuFromBytes(daemon_mtu_bytes, &daemon).ok()) return port_active;
  return std::min(port_active, daemon);
}

std::vector<QpTransition> DctTransitions(const VerbsDevice& device, const DctConfig& config) {
  return DctTransitions(device.port(), config);
}

std::vector<QpTransition> DctTransitions(const PortInfo& port, const DctConfig& config) {
  const bool roce = port.link_layer == IBV_LINK_LAYER_ETHERNET;
  std::vector<QpTransition> steps(2);
  steps[0] = InitTransition(port.port, config.remote_access);

  QpTransition& rtr = steps[1];
  rtr.attr.qp_state = IBV_QPS_RTR;
  rtr.attr.path_mtu = config.path_mtu.value_or(port.active_mtu);
  rtr.attr.min_rnr_timer = config.min_rnr_timer;
  rtr.attr.ah_attr.port_num = port.port;
  // The DCT's AV is what its responses (READ data, ACKs) leave with: the class and SL must be
  // the requests', or a lossless fabric carries the responses in a lossy class.
  rtr.attr.ah_attr.sl = config.service_level;
  if (roce) {
    rtr.attr.ah_attr.is_global = 1;
    rtr.attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid_index);
    rtr.attr.ah_attr.grh.hop_limit = config.hop_limit;
    rtr.attr.ah_attr.grh.traffic_class = config.traffic_class;
  }
  rtr.mask = IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU;
  return steps;
}

absl::StatusOr<uint64_t> RandomDcKey() {
  for (;;) {
    uint64_t key = 0;
    const ssize_t n = getrandom(&key, sizeof(key), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(key))) return VerbsError(errno ? errno : EIO, "getrandom");
    if (key != 0) return key;
  }
}

#if GDR_HAVE_MLX5DV

DcProbe ProbeDc(const VerbsDevice& device, ibv_cq* cq) {
  DcProbe p;
  if (!mlx5dv_is_supported(device.context()->device)) {
    p.why_not = absl::StrCat(device.name(),
                             " is not an mlx5 device (mlx5dv_is_supported() is false): DC needs "
                             "an NVIDIA/Mellanox ConnectX-5 or later");
    return p;
  }
  p.mlx5 = true;
  const ibv_device_attr& attr = device.attr();
  p.max_qp = static_cast<uint32_t>(std::max(0, attr.max_qp));
  p.max_qp_wr = static_cast<uint32_t>(std::max(0, attr.max_qp_wr));
  p.max_qp_init_rd_atom = static_cast<uint8_t>(std::clamp(attr.max_qp_init_rd_atom, 0, 255));
  mlx5dv_context dv{};
  dv.comp_mask = MLX5DV_CONTEXT_MASK_DCI_STREAMS;
#if GDR_HAVE_MLX5DV_DC_RD_ATOM
  dv.comp_mask |= MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM;
#endif
  if (mlx5dv_query_device(device.context(), &dv) == 0) {
    // On return comp_mask says which of the asked fields the provider filled in.
    if (dv.comp_mask & MLX5DV_CONTEXT_MASK_DCI_STREAMS) {
      p.dci_streams_log_concurrent = dv.dci_streams_caps.max_log_num_concurent;
      p.dci_streams_log_errored = dv.dci_streams_caps.max_log_num_errored;
    }
#if GDR_HAVE_MLX5DV_DC_RD_ATOM
    if (dv.comp_mask & MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM) {
      p.max_dc_init_rd_atom = static_cast<uint8_t>(std::min<uint64_t>(dv.max_dc_init_rd_atom, 255));
      p.max_dc_rd_atom = static_cast<uint8_t>(std::min<uint64_t>(dv.max_dc_rd_atom, 255));
    }
#endif
  }
  // No capability bit says "DC": the firmware/driver answer is whether a DCI can be made.
  DciConfig probe;
  probe.sq_depth = 1;
  absl::StatusOr<std::unique_ptr<QueuePair>> dci = CreateDci(device, cq, probe);
  if (!dci.ok()) {
    p.why_not = absl::StrCat(device.name(), " cannot create a DC initiator: ",
                             dci.status().message());
    return p;
  }
  p.dc = true;
  return p;
}

absl::StatusOr<std::unique_ptr<QueuePair>> CreateDci(const VerbsDevice& device, ibv_cq* cq,
                                                     const DciConfig& config) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_DRIVER;
  a.send_cq = cq;
  a.recv_cq = cq;
  a.pd = device.pd();
  a.cap.max_send_wr = config.sq_depth;
  a.cap.max_send_sge = 1;
  a.sq_sig_all = 0;  // every WR is posted IBV_SEND_SIGNALED by QueuePair::Post
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_READ;
  mlx5dv_qp_init_attr dv{};
  dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
  dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCI;
  if (config.log_streams > 0) {
    dv.comp_mask |= MLX5DV_QP_INIT_ATTR_MASK_DCI_STREAMS;
    dv.dc_init_attr.dci_streams.log_num_concurent = config.log_streams;
    dv.dc_init_attr.dci_streams.log_num_errored = config.log_errored;
  }
  VerbsPtr<ibv_qp> qp(mlx5dv_create_qp(device.context(), &a, &dv));
  if (!qp) {
    return VerbsError(errno, "mlx5dv_create_qp",
                      absl::StrCat("(MLX5DV_DCTYPE_DCI, ", config.sq_depth, " send WRs",
                                   config.log_streams
                                       ? absl::StrCat(", 2^", config.log_streams, " DCI streams")
                                       : "",
                                   ", on ", device.name(), ")"));
  }
  absl::StatusOr<std::unique_ptr<QueuePair>> dci = QueuePair::Adopt(std::move(qp), config.sq_depth);
  if (!dci.ok()) return dci.status();
  if (DciEx(**dci) == nullptr) {
    return VerbsError(errno ? errno : EINVAL, "mlx5dv_qp_ex_from_ibv_qp_ex");
  }
  return dci;
}

mlx5dv_qp_ex* DciEx(const QueuePair& dci) { return mlx5dv_qp_ex_from_ibv_qp_ex(dci.qpx()); }

absl::Status ResetDciStream(const QueuePair& dci, uint16_t stream) {
  const int rc = mlx5dv_dci_stream_id_reset(dci.qp(), stream);
  if (rc != 0) {
    return VerbsError(rc, "mlx5dv_dci_stream_id_reset",
                      absl::StrCat("(DCI ", dci.qp_num(), " stream ", stream, ")"));
  }
  return absl::OkStatus();
}

void SetDcAddress(mlx5dv_qp_ex* mqp, ibv_ah* ah, uint32_t dct_number, uint64_t dc_key,
                  bool streams, uint16_t stream) {
  if (streams) {
    mlx5dv_wr_set_dc_addr_stream(mqp, ah, dct_number, dc_key, stream);
  } else {
    mlx5dv_wr_set_dc_addr(mqp, ah, dct_number, dc_key);
  }
}

absl::StatusOr<DcTargetQp> CreateDct(const VerbsDevice& device, ibv_cq* cq, uint64_t dc_key,
                                     const DctConfig& config) {
  DcTargetQp t;
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 1;  // nothing is ever received: the DCT serves one-sided READ/WRITE only
  sa.attr.max_sge = 1;
  t.srq.reset(ibv_create_srq(device.pd(), &sa));
  if (!t.srq) return VerbsError(errno, "ibv_create_srq", absl::StrCat("(for the DCT on ", device.name(), ")"));
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_DRIVER;
  a.send_cq = cq;
  a.recv_cq = cq;
  a.srq = t.srq.get();
  a.pd = device.pd();
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  mlx5dv_qp_init_attr dv{};
  dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
  dv.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
  dv.dc_init_attr.dct_access_key = dc_key;
  t.dct.reset(mlx5dv_create_qp(device.context(), &a, &dv));
  if (!t.dct) {
    return VerbsError(errno, "mlx5dv_create_qp",
                      absl::StrCat("(MLX5DV_DCTYPE_DCT on ", device.name(), ")"));
  }
  for (const QpTransition& step : DctTransitions(device, config)) {
    ibv_qp_attr attr = step.attr;
    const int rc = ibv_modify_qp(t.dct.get(), &attr, step.mask);
    if (rc != 0) {
      return VerbsError(rc > 0 ? rc : errno, "ibv_modify_qp",
                        absl::StrCat("DCT ", t.dct->qp_num, " to ", QpStateName(step.attr.qp_state)));
    }
  }
  t.dct_number = t.dct->qp_num;
  return t;
}

#else  // !GDR_HAVE_MLX5DV

namespace {
absl::Status NoMlx5dv() {
  return absl::UnimplementedError(
      "this build has no mlx5dv (configure with -DGDR_WITH_MLX5DV=ON on a host with "
      "libibverbs-dev's infiniband/mlx5dv.h)");
}
}  // namespace

DcProbe ProbeDc(const VerbsDevice& device, ibv_cq*) {
  DcProbe p;
  p.why_not = absl::StrCat("this gdrstore build has no mlx5dv support (GDR_WITH_MLX5DV=OFF), so "
                           "DC is unavailable on ", device.name());
  return p;
}
absl::StatusOr<std::unique_ptr<QueuePair>> CreateDci(const VerbsDevice&, ibv_cq*,
                                                     const DciConfig&) {
  return NoMlx5dv();
}
mlx5dv_qp_ex* DciEx(const QueuePair&) { return nullptr; }
absl::Status ResetDciStream(const QueuePair&, uint16_t) { return NoMlx5dv(); }
void SetDcAddress(mlx5dv_qp_ex*, ibv_ah*, uint32_t, uint64_t, bool, uint16_t) {}
absl::StatusOr<DcTargetQp> CreateDct(const VerbsDevice&, ibv_cq*, uint64_t, const DctConfig&) {
  return NoMlx5dv();
}

#endif  // GDR_HAVE_MLX5DV

}  // namespace gdr::verbs
