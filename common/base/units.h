// Parsing and printing of byte sizes ("4KiB", "64M", "1g") used by flags and config files.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace gdr {

// Accepts a decimal integer with an optional suffix: K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TiB (all
// powers of 1024, case-insensitive). INVALID_ARGUMENT on anything else or on overflow.
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

// "64 MiB", "4 KiB", "17 B": the largest binary unit that divides `bytes` exactly.
std::string FormatSize(uint64_t bytes);

}  // namespace gdr
