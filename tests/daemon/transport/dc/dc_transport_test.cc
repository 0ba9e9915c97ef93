#include "daemon/transport/dc/dc_transport.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace gdr::dc {
namespace {

TEST(DcTransportTest, OffNeverStarts) {
  DcTransportConfig c;
  c.mode = DcTransportConfig::Mode::kOff;
  auto s = StartDcTransport(c, nullptr, "no RDMA devices on this host", 1 << 20, 1 << 20);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->initiator, nullptr);
  EXPECT_TRUE(absl::StrContains(s->detail, "--dc off")) << s->detail;
}

TEST(DcTransportTest, AutoWithoutADeviceSaysWhy) {
  DcTransportConfig c;
  auto s = StartDcTransport(c, nullptr, "no RDMA devices on this host", 1 << 20, 1 << 20);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->initiator, nullptr);
  EXPECT_TRUE(absl::StrContains(s->detail, "no RDMA devices on this host")) << s->detail;
}

TEST(DcTransportTest, OnWithoutADeviceIsFatalNamingIt) {
  DcTransportConfig c;
  c.mode = DcTransportConfig::Mode::kOn;
  auto s = StartDcTransport(c, nullptr, "no RDMA devices on this host", 1 << 20, 1 << 20);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "transport dc")) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "no RDMA devices")) << s.status();
}

}  // namespace
}  // namespace gdr::dc
