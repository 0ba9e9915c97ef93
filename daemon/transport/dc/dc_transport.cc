#include "daemon/transport/dc/dc_transport.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "daemon/transport/dc/mlx5_dc_device.h"
#include "daemon/transport/rc/rc_initiator.h"

namespace gdr::dc {

absl::StatusOr<DcStart> StartDcTransport(const DcTransportConfig& config, RcInitiator* rc,
                                         const std::string& rc_detail, uint64_t max_op_bytes,
                                         uint64_t chunk_bytes) {
  DcStart out;
  const bool required = config.mode == DcTransportConfig::Mode::kOn;
  if (config.mode == DcTransportConfig::Mode::kOff) {
    out.detail = "disabled by configuration (--dc off)";
    return out;
  }
  if (rc == nullptr) {
    out.detail = absl::StrCat("needs an RDMA device, and none is open: ", rc_detail);
    if (required) return absl::FailedPreconditionError(absl::StrCat("transport dc ", out.detail));
    return out;
  }
  std::unique_ptr<Mlx5DcDevice> device = Mlx5DcDevice::Open(&rc->device(), rc->poller());
  DcInitiatorOptions options = config.options;
  options.max_op_bytes = max_op_bytes;
  options.chunk_bytes = chunk_bytes;
  absl::StatusOr<std::unique_ptr<DcInitiator>> made = DcInitiator::Create(
      std::move(device), options,
      [rc](const TransferOp& op) { return rc->VolumeLkey(op.volume); });
  if (!made.ok()) {
    if (required) return made.status();
    out.detail = std::string(made.status().message());
    return out;
  }
  out.initiator = std::move(*made);
  const DcInitiator::Effective& e = out.initiator->effective();
  out.detail = absl::StrCat(e.dci_count, " DCIs on ", rc->device().name(), " port ",
                            rc->device().port().port, ", send queue ", e.sq_depth,
                            ", max_rd_atomic ", e.max_rd_atomic,
                            e.streams_per_dci > 1
                                ? absl::StrCat(", ", e.streams_per_dci, " DCI streams each")
                                : ", no DCI streams");
  return out;
}

}  // namespace gdr::dc
