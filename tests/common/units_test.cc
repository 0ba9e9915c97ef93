// Unit tests of size parsing and printing (common/base/units.h).
#include "common/base/units.h"

#include "gtest/gtest.h"

namespace gdr {
namespace {

TEST(UnitsTest, ParseSizeAcceptsEverySuffix) {
  struct Case {
    const char* text;
    uint64_t want;
  } cases[] = {
      {"0", 0},          {"17", 17},          {"17b", 17},        {"17B", 17},
      {"4k", 4096},      {"4K", 4096},        {"4KB", 4096},      {"4KiB", 4096},
      {"4kib", 4096},    {"64M", 64 << 20},   {"64mb", 64 << 20}, {"64MiB", 64 << 20},
      {"1g", 1ull << 30}, {"1GB", 1ull << 30}, {"1GiB", 1ull << 30}, {"2t", 2ull << 40},
      {"2TB", 2ull << 40}, {"2TiB", 2ull << 40}, {" 8 KiB ", 8192}, {"007k", 7168},
      {"18446744073709551615", UINT64_MAX},
  };
  for (const Case& c : cases) {
    absl::StatusOr<uint64_t> v = ParseSize(c.text);
    ASSERT_TRUE(v.ok()) << c.text << ": " << v.status();
    EXPECT_EQ(*v, c.want) << c.text;
  }
}

TEST(UnitsTest, ParseSizeRejectsMalformedText) {
  for (const char* text : {"", "   ", "KiB", "-1", "+5", "1.5G", "4KiBs", "4 X", "4kk", "0x10",
                           "1e3", "4P", "4PiB", "4 K i B"}) {
    absl::StatusOr<uint64_t> v = ParseSize(text);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << "'" << text << "'";
  }
}

TEST(UnitsTest, ParseSizeRejectsOverflow) {
  // Digits alone beyond 2^64-1.
  EXPECT_EQ(ParseSize("18446744073709551616").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSize("99999999999999999999999").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Shifting by the unit overflows.
  EXPECT_EQ(ParseSize("16777216TiB").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSize("17179869184GiB").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseSize("18014398509481984k").status().code(), absl::StatusCode::kInvalidArgument);
  // The largest values that fit.
  EXPECT_EQ(*ParseSize("16777215TiB"), 16777215ull << 40);
  EXPECT_EQ(*ParseSize("18014398509481983k"), 18014398509481983ull << 10);
}

TEST(UnitsTest, ParseSizeErrorQuotesTheText) {
  absl::StatusOr<uint64_t> v = ParseSize("12 parsecs");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("12 parsecs"), absl::string_view::npos)
      << v.status().message();
}

TEST(UnitsTest, FormatSizePicksTheLargestExactUnit) {
  EXPECT_EQ(FormatSize(0), "0 B");
  EXPECT_EQ(FormatSize(17), "17 B");
  EXPECT_EQ(FormatSize(1023), "1023 B");
  EXPECT_EQ(FormatSize(1024), "1 KiB");
  EXPECT_EQ(FormatSize(1025), "1025 B");
  EXPECT_EQ(FormatSize(4096), "4 KiB");
  EXPECT_EQ(FormatSize(1536 * 1024), "1536 KiB");
  EXPECT_EQ(FormatSize(64ull << 20), "64 MiB");
  EXPECT_EQ(FormatSize(1ull << 30), "1 GiB");
  EXPECT_EQ(FormatSize(3ull << 40), "3 TiB");
  EXPECT_EQ(FormatSize(1ull << 50), "1024 TiB");  // TiB is the largest unit
  EXPECT_EQ(FormatSize(UINT64_MAX), "18446744073709551615 B");
}

TEST(UnitsTest, FormatThenParseRoundTrips) {
  for (uint64_t v : {1ull, 4096ull, 1536ull << 10, 64ull << 20, 5ull << 30, 7ull << 40}) {
    const std::string text = FormatSize(v);
    absl::StatusOr<uint64_t> back = ParseSize(text);
    ASSERT_TRUE(back.ok()) << text << ": " << back.status();
    EXPECT_EQ(*back, v) << text;
  }
}

}  // namespace
}  // namespace gdr
