// The gRPC side of libgdrclient: the channel and stub a Client talks to its daemon through,
// and the helpers for the project's own code (the agent, gdrctl, tests) that builds requests
// itself. Private: the public headers name no gRPC type, so their callers need no gRPC headers.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gdrstore/client.h"
#include "gdrstore/types.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {

// What a Client holds of gRPC: its channel and the stub on it.
struct DaemonRpc {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<gdrstore::v1::GdrStore::Stub> stub;
};

// The stub of `client`'s channel, for requests the public API cannot make (a descriptor altered
// on purpose, a raw Stream). Valid while the Client lives.
gdrstore::v1::GdrStore::Stub* DaemonStub(const gdrstore::Client& client);

}  // namespace gdr

namespace gdrstore {

// The channel a Client talks to its daemon on: gRPC retries off (a retried op could run twice),
// TLS when options.tls_ca or tls_cert is set, and, when options.token is set, the bearer token
// attached to every call. For callers that build requests themselves on a channel of their
// own. INVALID_ARGUMENT / NOT_FOUND naming the option and file when a TLS file cannot be read
// or does not check out (PEM, key matching the certificate).
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenDaemonChannel(const ClientOptions& options);

// grpc::Status -> absl::Status, same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

// For callers with a stub of their own: GetInfo for `request` with its pages asked for in turn
// from request.volumes_after on and joined (next_volumes_after left empty), all before
// `deadline` (time_point::max(): none). A request for one volume or none is one call; from a
// daemon that predates paging the answer is filtered here. The first failing call's status
// (a later page's names where it started); INTERNAL when an answer's cursor does not move on.
absl::StatusOr<v1::GetInfoResponse> GetInfoPages(v1::GdrStore::StubInterface& stub,
                                                 v1::GetInfoRequest request,
                                                 std::chrono::system_clock::time_point deadline);
// The same for GetStats: every page's volumes, faults and agent.clients joined, the other
// figures as the first page had them.
absl::StatusOr<v1::GetStatsResponse> GetStatsPages(v1::GdrStore::StubInterface& stub,
                                                   std::chrono::system_clock::time_point deadline);

}  // namespace gdrstore
