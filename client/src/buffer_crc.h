// CRC32C of a range of a Buffer, for checking the daemon's answer to an op that asked for one:
// host memory in place, device memory through a copy to host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "gdrstore/client.h"

namespace gdr {

absl::StatusOr<uint32_t> BufferCrc32c(const gdrstore::Buffer& buffer, size_t offset,
                                      uint64_t length);

// OK when `daemon` (the answer's CRC32C) is present and equals the buffer's; DATA_LOSS naming
// both values when they differ; FAILED_PRECONDITION when the daemon sent none.
absl::Status CheckCrc32c(std::optional<uint32_t> daemon, const gdrstore::Buffer& buffer,
                         size_t offset, uint64_t length);

}  // namespace gdr
