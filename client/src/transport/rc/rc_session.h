// The client side of the rc transport: this process's RDMA device, passive RC QPs connected to
// the daemon's through the Connect RPC, and memory registration on the same PD. The daemon does
// every RDMA operation; these QPs only respond. When the daemon resets one of its QPs after an
// error (RcResetQp), the matching QP here is reset and reconnected and the daemon told so; a
// reconnect that fails (the port is down, so the daemon's address does not resolve) is tried
// again until it succeeds or the call ends.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/src/transport/client_transport.h"
#include "common/verbs/memory_region.h"
#include "common/verbs/queue_pair.h"
#include "common/verbs/rc_qp.h"
#include "common/verbs/verbs_device.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {

struct RcSessionOptions {
  verbs::DeviceSelector device;
  uint32_t qps = 2;  // QPs offered to the daemon (it may take fewer)
  std::chrono::milliseconds connect_timeout{10000};
  // The daemon rail to connect on (RcHello.rail); empty: the daemon's first serving rail.
  std::string daemon_rail;
  // Refuse (FAILED_PRECONDITION) a RoCE device without an address on the subnet of
  // device.peer_address: with rails, such a device is paired with another daemon rail.
  bool require_peer_subnet = false;
};

class RcSession final : public ClientTransport, public std::enable_shared_from_this<RcSession> {
 public:
  // Opens the device, creates the QPs, runs the Connect handshake. The errors of the device
  // (NOT_FOUND naming what exists), of the Connect call (e.g. UNIMPLEMENTED when the daemon has
  // no rc), DEADLINE_EXCEEDED when the daemon does not answer in time.
  static absl::StatusOr<std::shared_ptr<RcSession>> Open(gdrstore::v1::GdrStore::Stub* stub,
                                                         const RcSessionOptions& options);
  // Close().
  ~RcSession() override;
  RcSession(const RcSession&) = delete;
  RcSession& operator=(const RcSession&) = delete;

  // Ends the Connect call (the daemon then destroys its QPs) and waits for it. Idempotent.
  void Close() override;

  // ClientTransport: buffers on this device's PD, described by the connection id.
  absl::StatusOr<std::function<void()>> Register(const std::shared_ptr<Region>& region) override;
  void DescribeEndpoint(gdrstore::v1::RemoteBuffer* buffer) const override;
  // rc, "rc on DEVICE port N (Q QPs, connection C)", the device and connection.
  std::string HopTo(const Region& region, int rail) const override;
  void FillInfo(gdrstore::TransportInfo* info) const override;
  // A session with the daemon behind `stub` on this session's device (its PD, so every buffer
  // registered here is reachable there too): the same options, a Connect of its own.
  absl::StatusOr<std::shared_ptr<ClientTransport>> Attach(
      gdrstore::v1::GdrStore::Stub* stub) override;
  // The device and connection in use.
  gdrstore::RdmaLocalInfo rdma_info() const;

  uint64_t connection_id() const { return connection_id_; }
  const verbs::VerbsDevice& device() const { return *device_; }
  const std::string& daemon_device() const { return daemon_device_; }
  uint32_t qp_count() const { return static_cast<uint32_t>(qps_.size()); }
  // QP `index` (< qp_count()), for diagnosis and tests (ibv_query_qp); owned by the session.
  const verbs::QueuePair& qp(uint32_t index) const { return *qps_[index]; }
  uint64_t resets() const;
  // The Connect call's status once it has ended; OK while it runs.
  absl::Status call_status() const;
  absl::Status session_status() const override { return call_status(); }


 private:
  class Reactor;
  RcSession() = default;
  // Creates the QPs on `device` and runs the Connect handshake.
  static absl::StatusOr<std::shared_ptr<RcSession>> Connect(
      gdrstore::v1::GdrStore::Stub* stub, const RcSessionOptions& options,
      std::shared_ptr<verbs::VerbsDevice> device);
  // After the daemon's RcResetQp: replaces QP `index` by a new QP connected to the daemon's new
  // QP `daemon_qp` expecting `daemon_psn` (packets of the failed pair then reach neither). Its QP
  // number and send PSN, for RcQpReady.
  struct NewQp {
    uint32_t qp_number;
    uint32_t psn;
  };
  absl::StatusOr<NewQp> ResetQp(uint32_t index, uint32_t daemon_qp, uint32_t daemon_psn);

  RcSessionOptions options_;
  verbs::RcQpConfig config_;
  // Dependency order: device (context, PD; shared with the sessions Attach made), CQ, QPs;
  // the reactor last so it goes first.
  std::shared_ptr<verbs::VerbsDevice> device_;
  verbs::VerbsPtr<ibv_cq> cq_;
  std::vector<std::unique_ptr<verbs::QueuePair>> qps_;
  std::vector<verbs::RcPeer> daemon_qps_;  // the peer of each QP
  uint64_t connection_id_ = 0;
  std::string daemon_device_;
  std::unique_ptr<Reactor> reactor_;
};

}  // namespace gdr
