// The link rate of a port from ibv_port_attr's active_speed and active_width encodings.
#include "common/verbs/port_speed.h"

#include <gtest/gtest.h>

namespace gdr::verbs {
namespace {

TEST(PortSpeedTest, LanesTimesLaneRate) {
  EXPECT_EQ(PortSpeedMbps(32, 2), 100000u);   // EDR 4x: a ConnectX-5 100G port
  EXPECT_EQ(PortSpeedMbps(64, 2), 200000u);   // HDR 4x
  EXPECT_EQ(PortSpeedMbps(128, 2), 400000u);  // NDR 4x: a ConnectX-7 400G port
  EXPECT_EQ(PortSpeedMbps(128, 16), 200000u); // NDR 2x
  EXPECT_EQ(PortSpeedMbps(1, 1), 2500u);      // SDR 1x
  EXPECT_EQ(PortSpeedMbps(16, 8), 168000u);   // FDR 12x
  EXPECT_EQ(PortSpeedMbps(4, 4), 80000u);     // QDR 8x
  EXPECT_EQ(PortSpeedMbps(2, 2), 20000u);     // DDR 4x
  EXPECT_EQ(PortSpeedMbps(8, 2), 40000u);     // FDR10 4x
}

TEST(PortSpeedTest, AnUnknownEncodingIsZeroNotAGuess) {
  EXPECT_EQ(PortSpeedMbps(0, 2), 0u);
  EXPECT_EQ(PortSpeedMbps(3, 2), 0u);
  EXPECT_EQ(PortSpeedMbps(32, 0), 0u);
  EXPECT_EQ(PortSpeedMbps(32, 3), 0u);
  EXPECT_EQ(PortWidthLanes(32), 0);
  EXPECT_EQ(PortLaneMbps(255), 0u);
}

}  // namespace
}  // namespace gdr::verbs
