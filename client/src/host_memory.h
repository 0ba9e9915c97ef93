// What this process's memory map says about a host range a caller asks to register.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"

namespace gdr {

// Whether every byte of [p, p + n) is mapped writable in this process (false: mapped, but some
// page is read-only). INVALID_ARGUMENT naming the address when a byte is not mapped at all
// (freed, or never allocated); read from /proc/self/maps.
absl::StatusOr<bool> HostRangeWritable(const void* p, size_t n);

}  // namespace gdr
