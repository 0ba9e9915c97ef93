#include "common/grpc/grpc_status.h"

#include <string>

#include "absl/strings/cord.h"

namespace gdr {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

namespace {
constexpr char kNotAdmittedPayload[] = "type.gdrstore.dev/gdrstore.v1.NotAdmitted";
}  // namespace

absl::Status NotAdmittedError(absl::string_view message) {
  return MarkNotAdmitted(absl::ResourceExhaustedError(message));
}

absl::Status MarkNotAdmitted(absl::Status status) {
  status.SetPayload(kNotAdmittedPayload, absl::Cord("1"));
  return status;
}

bool IsNotAdmitted(const absl::Status& status) {
  return absl::IsResourceExhausted(status) && status.GetPayload(kNotAdmittedPayload).has_value();
}

}  // namespace gdr
