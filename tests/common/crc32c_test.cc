// CRC32C through ISA-L against the published check values.
#include "common/base/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace gdr {
namespace {

TEST(Crc32cTest, MatchesThePublishedCheckValues) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);  // the catalogue's check value
  EXPECT_EQ(Crc32c("", 0), 0u);
  // RFC 3720 (iSCSI), B.4: 32 bytes of zeros, of ones, ascending and descending.
  std::vector<unsigned char> b(32);
  EXPECT_EQ(Crc32c(b.data(), b.size()), 0x8A9136AAu);
  std::memset(b.data(), 0xFF, b.size());
  EXPECT_EQ(Crc32c(b.data(), b.size()), 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) b[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(Crc32c(b.data(), b.size()), 0x46DD794Eu);
  for (int i = 0; i < 32; ++i) b[i] = static_cast<unsigned char>(31 - i);
  EXPECT_EQ(Crc32c(b.data(), b.size()), 0x113FDB5Cu);
}

TEST(Crc32cTest, ContinuingEqualsComputingAtOnceAtAnySplit) {
  std::vector<unsigned char> b(10007);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>(i * 131 + 7);
  const uint32_t whole = Crc32c(b.data(), b.size());
  for (size_t split : {size_t{0}, size_t{1}, size_t{63}, size_t{4096}, size_t{10006}}) {
    EXPECT_EQ(Crc32c(b.data() + split, b.size() - split, Crc32c(b.data(), split)), whole)
        << split;
  }
  b[5000] ^= 0x10;
  EXPECT_NE(Crc32c(b.data(), b.size()), whole);
}

}  // namespace
}  // namespace gdr
