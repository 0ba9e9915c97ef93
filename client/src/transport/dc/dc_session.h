// The client side of the dc transport: this process's RDMA device, one DC target (an SRQ and an
// mlx5 DCT created with a DC access key generated here, at random, per process) and memory
// registration on the same PD. The daemon's DC initiators reach the DCT by (GID/LID, DCT number,
// key) carried in each request's descriptor; nothing is connected, so no handshake RPC exists.
// Needs an mlx5 device (ConnectX-5 or later) and a build with mlx5dv.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/src/transport/client_transport.h"
#include "common/verbs/dc_qp.h"
#include "common/verbs/memory_region.h"
#include "common/verbs/verbs_device.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

struct DcSessionOptions {
  verbs::DeviceSelector device;
  verbs::DctConfig dct;
  // The daemon's DCI path MTU in bytes (GetInfo rdma.dc.mtu); 0: not known (a daemon that does
  // not say). The DCT takes the smaller of it and this port's active MTU (verbs::DctPathMtu).
  uint32_t daemon_mtu = 0;
};

// Takes the daemon's DCI parameters (GetInfo rdma.dc) into `options`: the path MTU to match
// and the traffic class, SL and hop limit the DCT answers with. The values come from the
// network: INVALID_ARGUMENT naming the field when one is out of range (MTU not a path MTU,
// traffic class above 255, SL above 15, hop limit 0 or above 255); nothing is changed then.
absl::Status ApplyDaemonDcInfo(const gdrstore::v1::DcInfo& info, DcSessionOptions* options);

class DcSession final : public ClientTransport, public std::enable_shared_from_this<DcSession> {
 public:
  // Opens the device and creates the DCT. FAILED_PRECONDITION naming the missing capability
  // on a device that is not mlx5 or cannot do DC (rxe, iWARP, ConnectX-4); the device's NOT_FOUND
  // (naming what exists); the errno status of the verbs call that failed otherwise.
  static absl::StatusOr<std::shared_ptr<DcSession>> Open(const DcSessionOptions& options);
  DcSession(const DcSession&) = delete;
  DcSession& operator=(const DcSession&) = delete;

  const verbs::VerbsDevice& device() const { return *device_; }

  // ClientTransport: buffers on this device's PD; a descriptor carries the DCT number, the
  // access key, and this port's GID and LID. Nothing is held open, so Close does nothing.
  absl::StatusOr<std::function<void()>> Register(const std::shared_ptr<Region>& region) override;
  void DescribeEndpoint(gdrstore::v1::RemoteBuffer* buffer) const override;
  void Close() override {}
  uint32_t dct_number() const { return dct_.dct_number; }
  // dc, "dc: DCT 0x... on DEVICE port N", the DCT number. Every daemon's DCIs reach the one
  // DCT (Attach's default: nullptr).
  std::string HopTo(const Region& region, int rail) const override;
  void FillInfo(gdrstore::TransportInfo* info) const override;
  // The DCT's path MTU in bytes (sent in every descriptor, so the daemon can refuse a mismatch).
  uint32_t mtu() const { return mtu_bytes_; }


 private:
  DcSession() = default;
  // Dependency order: device (context, PD), CQ, then the DCT (and its SRQ).
  std::unique_ptr<verbs::VerbsDevice> device_;
  verbs::VerbsPtr<ibv_cq> cq_;
  verbs::DcTargetQp dct_;
  uint64_t key_ = 0;  // the DC access key: a secret, never logged
  uint32_t mtu_bytes_ = 0;
};

}  // namespace gdr
