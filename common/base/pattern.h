// The deterministic store pattern: every byte of a volume is a pure function of
// (volume name, offset, salt), so any byte a client reads can be verified without a prior write.
// Salt 0 is what the daemon fills volumes with at start; other salts let tests write data that
// is distinguishable from the initial fill.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include "absl/strings/string_view.h"

namespace gdr {

// Seed of a volume's pattern. Thread-safe, pure.
uint64_t PatternSeed(absl::string_view volume, uint64_t salt = 0);

// The pattern byte at `offset` of the stream with `seed`.
uint8_t PatternByte(uint64_t seed, uint64_t offset);

// Fills `out` with the pattern bytes [offset, offset + out.size()). Any alignment.
void PatternFill(uint64_t seed, uint64_t offset, std::span<std::byte> out);

// Index into `data` of the first byte that differs from the pattern at `offset`, or nullopt.
std::optional<size_t> PatternMismatch(uint64_t seed, uint64_t offset,
                                      std::span<const std::byte> data);

}  // namespace gdr
