#include "common/base/pattern.h"

#include <cstring>

namespace gdr {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// SplitMix64 finaliser: a cheap bijective mixer with good avalanche.
inline uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

inline uint64_t Word(uint64_t seed, uint64_t word_index) {
  return Mix(seed + word_index * kGolden);
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "pattern words are little-endian");

}  // namespace

uint64_t PatternSeed(absl::string_view volume, uint64_t salt) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (char c : volume) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return Mix(h ^ Mix(salt + kGolden));
}

uint8_t PatternByte(uint64_t seed, uint64_t offset) {
  return static_cast<uint8_t>(Word(seed, offset >> 3) >> (8 * (offset & 7)));
}

void PatternFill(uint64_t seed, uint64_t offset, std::span<std::byte> out) {
  size_t i = 0;
  const size_t n = out.size();
  // Unaligned head, byte by byte.
  while (i < n && ((offset + i) & 7) != 0) {
    out[i] = static_cast<std::byte>(PatternByte(seed, offset + i));
    ++i;
  }
  uint64_t w = (offset + i) >> 3;
  for (; i + 8 <= n; i += 8, ++w) {
    const uint64_t v = Word(seed, w);
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < n; ++i) out[i] = static_cast<std::byte>(PatternByte(seed, offset + i));
}

std::optional<size_t> PatternMismatch(uint64_t seed, uint64_t offset,
                                      std::span<const std::byte> data) {
  size_t i = 0;
  const size_t n = data.size();
  auto byte_check = [&](size_t j) {
    return data[j] == static_cast<std::byte>(PatternByte(seed, offset + j));
  };
  while (i < n && ((offset + i) & 7) != 0) {
    if (!byte_check(i)) return i;
    ++i;
  }
  uint64_t w = (offset + i) >> 3;
  for (; i + 8 <= n; i += 8, ++w) {
    const uint64_t v = Word(seed, w);
    if (std::memcmp(data.data() + i, &v, 8) != 0) {
      for (size_t j = i; j < i + 8; ++j)
        if (!byte_check(j)) return j;
    }
  }
  for (; i < n; ++i)
    if (!byte_check(i)) return i;
  return std::nullopt;
}

}  // namespace gdr
