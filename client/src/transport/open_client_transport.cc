#include "client/src/transport/open_client_transport.h"

#include <algorithm>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "client/src/transport/dc/dc_session.h"
#include "client/src/transport/rc/rc_session.h"
#include "client/src/transport/tcp/tcp_transport.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "common/verbs/gid_table.h"

namespace gdr {

namespace v1 = gdrstore::v1;

namespace {

verbs::DeviceSelector DeviceOf(const gdrstore::ClientOptions& o) {
  verbs::DeviceSelector d;
  d.device = o.rdma_device;
  d.address = o.rdma_address;
  d.gid_index = o.rdma_gid_index;
  return d;
}

// What the daemon says about itself; its RDMA part tells a verbs transport what to match.
absl::StatusOr<v1::GetInfoResponse> DaemonInfo(const gdrstore::ClientOptions& o,
                                               v1::GdrStore::Stub* stub) {
  grpc::ClientContext ctx;
  std::chrono::milliseconds timeout = std::chrono::seconds(10);
  if (o.rpc_timeout.count() > 0) timeout = std::min(timeout, o.rpc_timeout);
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::GetInfoResponse info;
  if (grpc::Status st = stub->GetInfo(&ctx, v1::GetInfoRequest(), &info); !st.ok()) {
    return absl::Status(FromGrpcStatus(st).code(), absl::StrCat("GetInfo: ", st.error_message()));
  }
  return info;
}

// The daemon's RDMA address as an IPv4 literal (its RoCE v2 GID, GetInfo rdma.gid), so this
// side's GID is chosen on the subnet the daemon is reached through; empty when not IPv4.
std::string PeerAddress(const v1::GetInfoResponse& info) {
  if (!info.has_rdma() || info.rdma().gid().size() != 16) return "";
  verbs::Gid gid;
  std::copy(info.rdma().gid().begin(), info.rdma().gid().end(), gid.begin());
  return verbs::GidIpv4(gid).value_or("");
}

}  // namespace

absl::StatusOr<std::shared_ptr<ClientTransport>> OpenClientTransport(
    gdrstore::ClientOptions* options, v1::GdrStore::Stub* stub) {
  switch (options->transport) {
    case gdrstore::Transport::kTcp:
      return TcpTransport::Open(options);
    case gdrstore::Transport::kRc: {
      RcSessionOptions ro;
      ro.device = DeviceOf(*options);
      // Only to choose the GID by the daemon's subnet: without an answer Connect says more.
      if (absl::StatusOr<v1::GetInfoResponse> info = DaemonInfo(*options, stub); info.ok()) {
        ro.device.peer_address = PeerAddress(*info);
      }
      ro.qps = options->rc_qps;
      if (options->rpc_timeout.count() > 0) {
        ro.connect_timeout = std::min(ro.connect_timeout, options->rpc_timeout);
      }
      absl::StatusOr<std::shared_ptr<RcSession>> session = RcSession::Open(stub, ro);
      if (!session.ok()) {
        return absl::Status(session.status().code(),
                            absl::StrCat("rc connect: ", session.status().message()));
      }
      return std::shared_ptr<ClientTransport>(std::move(*session));
    }
    case gdrstore::Transport::kDc: {
      DcSessionOptions dopt;
      dopt.device = DeviceOf(*options);
      // The DCT must answer with the daemon's DCIs' path MTU and class (GetInfo rdma.dc).
      absl::StatusOr<v1::GetInfoResponse> info = DaemonInfo(*options, stub);
      if (!info.ok()) {
        return absl::Status(info.status().code(),
                            absl::StrCat("transport dc: ", info.status().message()));
      }
      dopt.device.peer_address = PeerAddress(*info);
      if (info->has_rdma() && info->rdma().has_dc()) {
        GDR_RETURN_IF_ERROR(ApplyDaemonDcInfo(info->rdma().dc(), &dopt));
      }
      absl::StatusOr<std::shared_ptr<DcSession>> session = DcSession::Open(dopt);
      if (!session.ok()) return session.status();
      return std::shared_ptr<ClientTransport>(std::move(*session));
    }
    case gdrstore::Transport::kAuto:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("transport ", gdrstore::TransportName(options->transport),
                   " cannot be opened directly"));
}

}  // namespace gdr
