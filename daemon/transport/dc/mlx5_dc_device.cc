#include "daemon/transport/dc/mlx5_dc_device.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/verbs/verbs_status.h"
#include "common/base/status_macros.h"

namespace gdr::dc {
namespace {

class Mlx5Ah final : public AddressHandle {
 public:
  explicit Mlx5Ah(verbs::VerbsPtr<ibv_ah> ah) : ah_(std::move(ah)) {}
  ibv_ah* get() const { return ah_.get(); }

 private:
  verbs::VerbsPtr<ibv_ah> ah_;
};

}  // namespace

DcCaps CapsFromProbe(const verbs::DcProbe& probe, const std::string& device_name,
                     const verbs::PortInfo& port) {
  DcCaps c;
  c.mlx5 = probe.mlx5;
  c.dc = probe.dc;
  c.why_not = probe.why_not;
  c.max_qp = probe.max_qp;
  c.max_qp_wr = probe.max_qp_wr;
  c.max_qp_rd_atom = probe.max_qp_init_rd_atom;
  c.max_dc_init_rd_atom = probe.max_dc_init_rd_atom;
  c.max_log_num_concurent = probe.dci_streams_log_concurrent;
  c.max_log_num_errored = probe.dci_streams_log_errored;
  c.port_max_msg_size = port.max_msg_size;
  c.port_active_mtu = verbs::MtuBytes(port.active_mtu);
  c.where = absl::StrCat(device_name, " port ", port.port);
  return c;
}

std::unique_ptr<Mlx5DcDevice> Mlx5DcDevice::Open(const verbs::VerbsDevice* device,
                                                 verbs::CompletionPoller* poller) {
  const verbs::DcProbe probe = verbs::ProbeDc(*device, poller->cq());
  return std::unique_ptr<Mlx5DcDevice>(
      new Mlx5DcDevice(device, poller, CapsFromProbe(probe, device->name(), device->port())));
}

absl::Status Mlx5DcDevice::CreateDci(uint32_t index, const DciSettings& s) {
  if (index != dcis_.size()) return absl::InternalError("DCIs must be created in order");
  verbs::DciConfig cfg;
  cfg.sq_depth = s.sq_depth;
  cfg.max_rd_atomic = s.max_rd_atomic;
  if (s.mtu != 0) {
    ibv_mtu mtu;
    GDR_RETURN_IF_ERROR(verbs::MtuFromBytes(s.mtu, &mtu));
    cfg.path_mtu = mtu;
  }
  cfg.timeout = s.timeout;
  cfg.retry_cnt = s.retry_cnt;
  cfg.rnr_retry = s.rnr_retry;
  cfg.log_streams = s.log_streams;
  cfg.log_errored = s.log_errored;
  absl::StatusOr<std::unique_ptr<verbs::QueuePair>> qp =
      verbs::CreateDci(*device_, poller_->cq(), cfg);
  if (!qp.ok()) return qp.status();
  Dci d;
  d.qp = std::move(*qp);
  d.mqp = verbs::DciEx(*d.qp);
  d.bring_up = verbs::DciTransitions(*device_, cfg);
  d.streams = s.log_streams > 0;
  GDR_RETURN_IF_ERROR(d.qp->BringUp(d.bring_up));
  dcis_.push_back(std::move(d));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<AddressHandle>> Mlx5DcDevice::CreateAh(const AhKey& key,
                                                                      const AhSettings& s) {
  ibv_ah_attr attr{};
  attr.port_num = device_->port().port;
  attr.sl = s.service_level;
  attr.dlid = key.lid;
  const bool has_gid = std::any_of(key.gid.begin(), key.gid.end(), [](uint8_t b) { return b; });
  if (device_->is_roce() || has_gid) {
    attr.is_global = 1;
    std::memcpy(attr.grh.dgid.raw, key.gid.data(), 16);
    attr.grh.sgid_index = static_cast<uint8_t>(device_->port().gid_index);
    attr.grh.hop_limit = s.hop_limit;
    attr.grh.traffic_class = s.traffic_class;
    attr.grh.flow_label = s.flow_label;
  }
  verbs::VerbsPtr<ibv_ah> ah(ibv_create_ah(device_->pd(), &attr));
  if (!ah) return verbs::VerbsError(errno, "ibv_create_ah");
  return std::shared_ptr<AddressHandle>(std::make_shared<Mlx5Ah>(std::move(ah)));
}

absl::Status Mlx5DcDevice::Post(uint32_t dci, std::span<const DcWr> wrs) {
  if (dci >= dcis_.size()) return absl::InternalError(absl::StrCat("no DCI ", dci));
  const uint32_t n = static_cast<uint32_t>(wrs.size());
  if (!poller_->TryReserve(n)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the completion queue of ", device_->name(), " is full (", poller_->depth(),
        " entries); retry later"));
  }
  std::vector<verbs::RdmaWr> rdma(wrs.size());
  for (size_t i = 0; i < wrs.size(); ++i) {
    const DcWr& w = wrs[i];
    rdma[i].wr_id = reinterpret_cast<uint64_t>(w.handler);
    rdma[i].op = w.op == DcOpcode::kWrite ? verbs::RdmaOp::kWrite : verbs::RdmaOp::kRead;
    rdma[i].remote_addr = w.remote_addr;
    rdma[i].rkey = w.rkey;
    rdma[i].local_addr = w.local_addr;
    rdma[i].lkey = w.lkey;
    rdma[i].length = w.length;
  }
  Dci& d = dcis_[dci];
  size_t next = 0;
  absl::Status st = d.qp->Post(rdma, [&](ibv_qp_ex*, const verbs::RdmaWr&) {
    const DcWr& w = wrs[next++];
    verbs::SetDcAddress(d.mqp, static_cast<const Mlx5Ah*>(w.ah)->get(), w.dct_number,
                        w.access_key.value(), d.streams, w.stream);
  });
  if (!st.ok()) poller_->Release(n);
  return st;
}

void Mlx5DcDevice::ReleaseCompletionSlots(uint32_t n) { poller_->Release(n); }

absl::StatusOr<bool> Mlx5DcDevice::DciInError(uint32_t dci) {
  absl::StatusOr<ibv_qp_state> s = dcis_[dci].qp->QueryState();
  if (!s.ok()) return s.status();
  return *s == IBV_QPS_ERR || *s == IBV_QPS_SQE;
}

absl::Status Mlx5DcDevice::RecoverDci(uint32_t dci) {
  return dcis_[dci].qp->Recover(dcis_[dci].bring_up);
}

absl::Status Mlx5DcDevice::ResetStream(uint32_t dci, uint16_t stream) {
  return verbs::ResetDciStream(*dcis_[dci].qp, stream);
}

void Mlx5DcDevice::FlushAll() {
  for (Dci& d : dcis_) {
    if (absl::Status st = d.qp->MoveToError(); !st.ok()) {
      GDR_LOG(kError) << "dc: cannot flush DCI " << d.qp->qp_num() << ": " << st.message();
    }
  }
}

}  // namespace gdr::dc
