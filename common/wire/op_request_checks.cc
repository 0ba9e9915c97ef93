#include "common/wire/op_request_checks.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gdr {

absl::Status CheckOpExtent(const gdrstore::v1::Extent* extent,
                           const gdrstore::v1::RemoteBuffer* buffer) {
  if (extent == nullptr) return absl::InvalidArgumentError("request has no extent");
  if (buffer == nullptr) return absl::InvalidArgumentError("request has no buffer");
  if (extent->length() == 0) return absl::InvalidArgumentError("extent.length is 0");
  return absl::OkStatus();
}

absl::Status CheckOpBuffer(const gdrstore::v1::Extent& extent,
                           const gdrstore::v1::RemoteBuffer& buffer) {
  if (buffer.length() != extent.length()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "buffer.length ", buffer.length(), " differs from extent.length ", extent.length()));
  }
  if (buffer.rkey() == 0) return absl::InvalidArgumentError("buffer.rkey is 0");
  if (buffer.address() > UINT64_MAX - buffer.length()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "buffer [0x%x, +%u) wraps the address space", buffer.address(), buffer.length()));
  }
  return absl::OkStatus();
}

}  // namespace gdr
