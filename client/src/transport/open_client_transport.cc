#include "client/src/transport/open_client_transport.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/src/transport/dc/dc_session.h"
#include "client/src/transport/rc/rc_session.h"
#include "client/src/transport/tcp/tcp_transport.h"

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

}  // namespace

absl::StatusOr<std::shared_ptr<ClientTransport>> OpenClientTransport(
    gdrstore::ClientOptions* options, v1::GdrStore::Stub* stub) {
  switch (options->transport) {
    case gdrstore::Transport::kTcp:
      return TcpTransport::Open(options);
    case gdrstore::Transport::kRc: {
      RcSessionOptions ro;
      ro.device = DeviceOf(*options);
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
