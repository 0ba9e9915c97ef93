// absl::Status <-> grpc::Status, code and message unchanged: the project's code speaks absl
// and gRPC carries the same canonical codes, so the conversion is a cast both ways.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace gdr {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// An op the daemon refused before starting it because an in-flight limit was full: nothing
// moved and the same op may be sent again once answers have freed room. RESOURCE_EXHAUSTED,
// told apart from other RESOURCE_EXHAUSTED answers (an injected fault, memory) by a payload
// inside the daemon, by the trailing metadata kNotAdmittedKey ("1") on a unary call and by
// StreamResult.not_admitted on a Stream, so that clients wait and resend only what is safe to.
absl::Status NotAdmittedError(absl::string_view message);
bool IsNotAdmitted(const absl::Status& status);
// The status as IsNotAdmitted sees it again (the client side of the metadata / field).
absl::Status MarkNotAdmitted(absl::Status status);
inline constexpr char kNotAdmittedKey[] = "gdr-not-admitted";

}  // namespace gdr
