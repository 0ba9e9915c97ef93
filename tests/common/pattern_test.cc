// Unit tests of the deterministic store pattern (common/base/pattern.h): the word-at-a-time fill and
// compare must agree with the byte-at-a-time definition at every alignment.
#include "common/base/pattern.h"

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace gdr {
namespace {

std::vector<std::byte> Reference(uint64_t seed, uint64_t offset, size_t n) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>(PatternByte(seed, offset + i));
  return v;
}

TEST(PatternTest, FillMatchesPatternByteAtUnalignedOffsetsAndSmallLengths) {
  const uint64_t seed = PatternSeed("vol0");
  for (uint64_t offset : {0ull, 1ull, 3ull, 7ull, 8ull, 9ull, 15ull, 4093ull, 1ull << 33}) {
    for (size_t n = 0; n <= 100; ++n) {
      // Guard bytes on both sides catch a fill that writes outside its span.
      std::vector<std::byte> buf(n + 16, std::byte{0xA5});
      PatternFill(seed, offset, std::span<std::byte>(buf.data() + 8, n));
      const auto want = Reference(seed, offset, n);
      for (size_t i = 0; i < 8; ++i) {
        ASSERT_EQ(buf[i], std::byte{0xA5}) << "offset " << offset << " n " << n;
        ASSERT_EQ(buf[8 + n + i], std::byte{0xA5}) << "offset " << offset << " n " << n;
      }
      ASSERT_TRUE(std::equal(want.begin(), want.end(), buf.begin() + 8))
          << "offset " << offset << " n " << n;
      EXPECT_EQ(PatternMismatch(seed, offset, std::span<const std::byte>(buf.data() + 8, n)),
                std::nullopt)
          << "offset " << offset << " n " << n;
    }
  }
}

TEST(PatternTest, FillMatchesPatternByteForLargeBuffers) {
  const uint64_t seed = PatternSeed("big", 7);
  for (uint64_t offset : {0ull, 5ull, 123457ull}) {
    const size_t n = (1 << 20) + 13;
    std::vector<std::byte> buf(n);
    PatternFill(seed, offset, buf);
    EXPECT_EQ(buf, Reference(seed, offset, n)) << "offset " << offset;
    EXPECT_EQ(PatternMismatch(seed, offset, buf), std::nullopt);
  }
}

TEST(PatternTest, FillIsConsistentAcrossSplitPoints) {
  // Filling [o, o+n) in two pieces at any split equals one fill: the pattern is a pure
  // function of the absolute offset.
  const uint64_t seed = PatternSeed("split");
  std::vector<std::byte> whole(64);
  PatternFill(seed, 3, whole);
  for (size_t cut = 0; cut <= whole.size(); ++cut) {
    std::vector<std::byte> parts(whole.size());
    PatternFill(seed, 3, std::span<std::byte>(parts.data(), cut));
    PatternFill(seed, 3 + cut, std::span<std::byte>(parts.data() + cut, parts.size() - cut));
    ASSERT_EQ(parts, whole) << "cut " << cut;
  }
}

TEST(PatternTest, SeedsDifferByVolumeAndSalt) {
  EXPECT_EQ(PatternSeed("vol0"), PatternSeed("vol0", 0));
  EXPECT_EQ(PatternSeed("vol0", 5), PatternSeed("vol0", 5));
  EXPECT_NE(PatternSeed("vol0"), PatternSeed("vol1"));
  EXPECT_NE(PatternSeed("vol0"), PatternSeed("vol0", 1));
  EXPECT_NE(PatternSeed("vol0", 1), PatternSeed("vol0", 2));
  EXPECT_NE(PatternSeed(""), PatternSeed("a"));

  // Different seeds must give different data, not just different seed numbers.
  std::vector<std::byte> a(4096), b(4096), c(4096);
  PatternFill(PatternSeed("vol0"), 0, a);
  PatternFill(PatternSeed("vol1"), 0, b);
  PatternFill(PatternSeed("vol0", 1), 0, c);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_TRUE(PatternMismatch(PatternSeed("vol1"), 0, a).has_value());
  EXPECT_TRUE(PatternMismatch(PatternSeed("vol0", 1), 0, a).has_value());
  // A different offset is a different stream too.
  EXPECT_TRUE(PatternMismatch(PatternSeed("vol0"), 1, a).has_value());
}

TEST(PatternTest, PatternIsNotTriviallyPeriodic) {
  // Consecutive words differ: a fill stuck on one word would pass a same-offset round trip.
  const uint64_t seed = PatternSeed("vol0");
  std::vector<std::byte> buf(64);
  PatternFill(seed, 0, buf);
  EXPECT_FALSE(std::equal(buf.begin(), buf.begin() + 8, buf.begin() + 8));
  EXPECT_FALSE(std::equal(buf.begin() + 8, buf.begin() + 16, buf.begin() + 16));
}

TEST(PatternTest, MismatchFindsEveryCorruptedIndexExactly) {
  const uint64_t seed = PatternSeed("vol0", 3);
  for (uint64_t offset : {0ull, 1ull, 5ull, 8ull, 13ull}) {
    for (size_t n : {1ul, 7ul, 8ul, 9ul, 31ul, 100ul}) {
      std::vector<std::byte> buf(n);
      PatternFill(seed, offset, buf);
      for (size_t bad = 0; bad < n; ++bad) {
        std::vector<std::byte> copy = buf;
        copy[bad] ^= std::byte{0x01};
        ASSERT_EQ(PatternMismatch(seed, offset, copy), bad)
            << "offset " << offset << " n " << n << " bad " << bad;
      }
    }
  }
}

TEST(PatternTest, MismatchReportsTheFirstOfSeveral) {
  const uint64_t seed = PatternSeed("vol0");
  std::vector<std::byte> buf(1000);
  PatternFill(seed, 3, buf);
  buf[997] ^= std::byte{0xFF};  // tail
  buf[500] ^= std::byte{0x80};  // body word
  EXPECT_EQ(PatternMismatch(seed, 3, buf), 500u);
  buf[2] ^= std::byte{0x10};  // head (offset 3: bytes 0..4 are unaligned)
  EXPECT_EQ(PatternMismatch(seed, 3, buf), 2u);
}

TEST(PatternTest, MismatchInLargeBufferAtEnd) {
  const uint64_t seed = PatternSeed("vol0");
  const size_t n = (4 << 20) + 3;
  std::vector<std::byte> buf(n);
  PatternFill(seed, 7, buf);
  ASSERT_EQ(PatternMismatch(seed, 7, buf), std::nullopt);
  buf[n - 1] ^= std::byte{0x40};
  EXPECT_EQ(PatternMismatch(seed, 7, buf), n - 1);
  buf[n - 1] ^= std::byte{0x40};
  buf[n / 2] ^= std::byte{0x40};
  EXPECT_EQ(PatternMismatch(seed, 7, buf), n / 2);
}

TEST(PatternTest, EmptySpanNeverMismatches) {
  EXPECT_EQ(PatternMismatch(PatternSeed("x"), 12345, {}), std::nullopt);
}

}  // namespace
}  // namespace gdr
