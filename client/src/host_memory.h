// Host memory of the library's own (memfd-backed, so that another process on the host can map
// the same pages), and what this process's memory map says about a range a caller registers.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"

namespace gdr {

// `bytes` (a multiple of the page size) of zeroed memory from a memfd, mapped shared and
// read-write, sealed against shrinking and growing so that a process it is handed to can never
// see its mapping cut short. RESOURCE_EXHAUSTED naming the size and errno's text.
struct SharedHostMemory {
  std::byte* data = nullptr;
  size_t bytes = 0;
  int fd = -1;
};
absl::StatusOr<SharedHostMemory> AllocateSharedHostMemory(size_t bytes);
// Unmaps and closes what AllocateSharedHostMemory made.
void FreeSharedHostMemory(const SharedHostMemory& mem);

// Whether every byte of [p, p + n) is mapped writable in this process (false: mapped, but some
// page is read-only). INVALID_ARGUMENT naming the address when a byte is not mapped at all
// (freed, or never allocated); read from /proc/self/maps.
absl::StatusOr<bool> HostRangeWritable(const void* p, size_t n);

}  // namespace gdr
