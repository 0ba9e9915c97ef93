// Opens the transport ClientOptions::transport names, choosing one for auto, and shares an open
// one with another daemon (the cluster client's members). The only code of the client that
// branches on the kind.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "client/src/transport/client_transport.h"
#include "gdrstore/types.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {

// What OpenClientTransport opened.
struct OpenedTransport {
  std::shared_ptr<ClientTransport> transport;
  // The daemon's GetInfo answer when opening asked for one (rc, dc, rails, auto): a connect
  // asks once and hands the answer on (the admission window takes the daemon's limits from it).
  std::optional<gdrstore::v1::GetInfoResponse> daemon_info;
  // auto: why a faster transport was not picked ("dc: ...; rc: ..."); empty otherwise.
  std::string auto_notes;
};

// `stub` must outlive the transport (rc's Connect call runs on it). Fills in what was left to
// be chosen: the transport auto picked (GetInfo says what the daemon offers; dc, rc, tcp are
// tried in turn), the tcp target's host. The transport's own errors: the device's NOT_FOUND,
// rc's Connect errors prefixed "rc connect: ", dc's FAILED_PRECONDITION, the target's
// UNAVAILABLE; for auto, UNAVAILABLE listing why each transport failed.
absl::StatusOr<OpenedTransport> OpenClientTransport(gdrstore::ClientOptions* options,
                                                    gdrstore::v1::GdrStore::Stub* stub);

// Through the node agent at options.agent: its socket's handoff session (the transport, local)
// and the gRPC channel every call goes on (client/src/transport/agent/). The agent's refusal
// or UNAVAILABLE naming the socket.
struct OpenedAgent {
  std::shared_ptr<grpc::Channel> channel;
  std::shared_ptr<ClientTransport> transport;
};
absl::StatusOr<OpenedAgent> OpenAgent(const gdrstore::ClientOptions& options);

// `base` for the daemon behind `stub` (which must outlive what is returned), sharing its target
// or device and every registration made on it (ClientTransport::Attach). A transport that
// serves every daemon as it is comes back as a view whose Close leaves it open: `base` is
// closed by its own owner.
absl::StatusOr<std::shared_ptr<ClientTransport>> AttachClientTransport(
    std::shared_ptr<ClientTransport> base, gdrstore::v1::GdrStore::Stub* stub);

}  // namespace gdr
