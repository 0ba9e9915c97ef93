// Filling one Write/Read request (extent + descriptor) for the unary calls and the Stream.
#pragma once

#include "absl/status/status.h"
#include "gdrstore/client.h"

namespace gdr {

// On rail `rail` of the client's transport (0 without rails), asking for the bytes' CRC32C
// with `crc32c`. INVALID_ARGUMENT when [buffer_offset, +extent.length) is outside `buffer`.
template <typename Req>
absl::Status FillRequest(const gdrstore::Client& client, const gdrstore::Extent& extent,
                         const gdrstore::Buffer& buffer, size_t buffer_offset, int rail,
                         bool crc32c, Req* req) {
  absl::StatusOr<gdrstore::v1::RemoteBuffer> rb =
      client.Describe(buffer, buffer_offset, extent.length, rail);
  if (!rb.ok()) return rb.status();
  req->mutable_extent()->set_volume(extent.volume);
  req->mutable_extent()->set_offset(extent.offset);
  req->mutable_extent()->set_length(extent.length);
  *req->mutable_buffer() = std::move(*rb);
  req->set_crc32c(crc32c);
  return absl::OkStatus();
}

}  // namespace gdr
