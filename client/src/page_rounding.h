// The size in whole pages of a host allocation the library makes for a caller (Client's and
// ClusterClient's buffers): one checked rounding, so that a size near SIZE_MAX is refused
// instead of wrapping to a tiny (or zero-byte) allocation that the caller then overruns.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace gdr {

// `bytes` rounded up to whole pages of `page` bytes (a power of two; default: this host's page
// size). INVALID_ARGUMENT for 0 bytes; RESOURCE_EXHAUSTED when the rounded size would not fit
// in size_t.
inline absl::StatusOr<size_t> PageRounded(size_t bytes, size_t page = 0) {
  if (page == 0) page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (bytes == 0) return absl::InvalidArgumentError("buffer size must be > 0");
  if (bytes > SIZE_MAX - (page - 1)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", bytes, " bytes: more than the address space holds"));
  }
  return (bytes + page - 1) / page * page;
}

}  // namespace gdr
