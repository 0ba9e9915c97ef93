// The store-free checks of a data op's request (common/wire/op_request_checks.h) that gdrstored
// and gdragent share: each malformed field refused naming it, a sound request accepted.
#include "common/wire/op_request_checks.h"

#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;
namespace v1 = gdrstore::v1;

class OpRequestChecksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    extent_.set_volume("vol0");
    extent_.set_length(8192);
    buffer_.set_address(0x7f0000001000ull);
    buffer_.set_length(8192);
    buffer_.set_rkey(9);
  }
  // The message of the refusal, "" when both checks pass.
  std::string Refusal() {
    absl::Status s = CheckOpExtent(&extent_, &buffer_);
    if (s.ok()) s = CheckOpBuffer(extent_, buffer_);
    EXPECT_TRUE(s.ok() || absl::IsInvalidArgument(s)) << s;
    return std::string(s.message());
  }
  v1::Extent extent_;
  v1::RemoteBuffer buffer_;
};

TEST_F(OpRequestChecksTest, ASoundRequestPasses) { EXPECT_EQ(Refusal(), ""); }

TEST_F(OpRequestChecksTest, AMissingExtentOrBufferIsNamed) {
  EXPECT_THAT(CheckOpExtent(nullptr, &buffer_).message(), HasSubstr("no extent"));
  EXPECT_THAT(CheckOpExtent(&extent_, nullptr).message(), HasSubstr("no buffer"));
}

TEST_F(OpRequestChecksTest, EachBadFieldIsNamed) {
  extent_.set_length(0);
  buffer_.set_length(0);
  EXPECT_EQ(Refusal(), "extent.length is 0");
  extent_.set_length(8192);
  buffer_.set_length(8191);
  EXPECT_EQ(Refusal(), "buffer.length 8191 differs from extent.length 8192");
  buffer_.set_length(8192);
  buffer_.set_rkey(0);
  EXPECT_EQ(Refusal(), "buffer.rkey is 0");
}

TEST_F(OpRequestChecksTest, ARangeWhoseEndWrapsIsRefused) {
  buffer_.set_address(UINT64_MAX - 8192);  // its last byte is UINT64_MAX - 1
  EXPECT_EQ(Refusal(), "");
  // Its end (one past the last byte) must be an address too: 2^64 is not.
  buffer_.set_address(UINT64_MAX - 8191);
  EXPECT_THAT(Refusal(), HasSubstr("wraps the address space"));
  buffer_.set_address(UINT64_MAX);
  EXPECT_THAT(Refusal(), HasSubstr("wraps the address space"));
}

}  // namespace
}  // namespace gdr
