// Opens the transport `options.transport` names (tcp, rc or dc; not auto, which the Client
// resolves by trying these in turn). The only code of the client that branches on the kind.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "client/src/transport/client_transport.h"
#include "gdrstore/client.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {

// `stub` must outlive the transport (rc's Connect call runs on it). Fills in what was left to
// be chosen (the tcp target's host). The transport's own errors: the device's NOT_FOUND, rc's
// Connect errors prefixed "rc connect: ", dc's FAILED_PRECONDITION, the target's UNAVAILABLE.
absl::StatusOr<std::shared_ptr<ClientTransport>> OpenClientTransport(
    gdrstore::ClientOptions* options, gdrstore::v1::GdrStore::Stub* stub);

}  // namespace gdr
