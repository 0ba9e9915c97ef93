// absl::Status <-> grpc::Status, code and message unchanged: the project's code speaks absl
// and gRPC carries the same canonical codes, so the conversion is a cast both ways.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace gdr {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace gdr
