#include "daemon/transport/dc/dc_transport.h"

#include "absl/strings/str_cat.h"
#include "daemon/transport/dc/mlx5_dc_device.h"

namespace gdr::dc {

absl::StatusOr<DcStart> StartDcTransport(const DcTransportConfig& config, VerbsCore* core,
                                         const std::string& core_detail, uint64_t max_op_bytes,
                                         uint64_t chunk_bytes) {
  DcStart out;
  const bool required = config.mode == DcTransportConfig::Mode::kOn;
  if (config.mode == DcTransportConfig::Mode::kOff) {
    out.detail = "disabled by configuration (--dc off)";
    return out;
  }
  if (core == nullptr) {
    out.detail = absl::StrCat("needs an RDMA device, and none is open: ", core_detail);
    if (required) return absl::FailedPreconditionError(absl::StrCat("transport dc ", out.detail));
    return out;
  }
  std::unique_ptr<Mlx5DcDevice> device = Mlx5DcDevice::Open(&core->device(), core->poller());
  DcInitiatorOptions options = config.options;
  options.max_op_bytes = max_op_bytes;
  options.chunk_bytes = chunk_bytes;
  absl::StatusOr<std::unique_ptr<DcInitiator>> made = DcInitiator::Create(
      std::move(device), options,
      [core](const TransferOp& op) { return core->VolumeLkey(*op.store_volume); });
  if (!made.ok()) {
    if (required) return made.status();
    out.detail = std::string(made.status().message());
    return out;
  }
  out.initiator = std::move(*made);
  return out;
}

}  // namespace gdr::dc
