// The client's half of the dc agreement, without a device: what it takes from the daemon's
// GetInfo (rdma.dc) for its DCT. The DCT itself needs a ConnectX (dc never ran here).
#include "client/src/transport/dc/dc_session.h"

#include <gtest/gtest.h>

namespace gdr {
namespace {

gdrstore::v1::DcInfo Info(uint32_t mtu, uint32_t tc, uint32_t sl, uint32_t hop) {
  gdrstore::v1::DcInfo i;
  i.set_mtu(mtu);
  i.set_traffic_class(tc);
  i.set_service_level(sl);
  i.set_hop_limit(hop);
  return i;
}

TEST(DcSessionTest, TheDctTakesTheDaemonsMtuClassSlAndHopLimit) {
  DcSessionOptions o;
  ASSERT_TRUE(ApplyDaemonDcInfo(Info(1024, 106, 3, 9), &o).ok());
  EXPECT_EQ(o.daemon_mtu, 1024u);
  EXPECT_EQ(o.dct.traffic_class, 106);
  EXPECT_EQ(o.dct.service_level, 3);
  EXPECT_EQ(o.dct.hop_limit, 9);
  // The MTU the DCT then uses: the smaller of this port's and the daemon's.
  EXPECT_EQ(verbs::DctPathMtu(IBV_MTU_4096, o.daemon_mtu), IBV_MTU_1024);
  EXPECT_EQ(verbs::DctPathMtu(IBV_MTU_512, o.daemon_mtu), IBV_MTU_512);
}

TEST(DcSessionTest, ADaemonThatSaysNothingLeavesTheDefaults) {
  DcSessionOptions o;
  ASSERT_TRUE(ApplyDaemonDcInfo(gdrstore::v1::DcInfo(), &o).ok());
  EXPECT_EQ(o.daemon_mtu, 0u);
  EXPECT_EQ(o.dct.hop_limit, 64) << "hop limit 0 is not a value: ours stays";
  EXPECT_EQ(verbs::DctPathMtu(IBV_MTU_2048, o.daemon_mtu), IBV_MTU_2048);
}

// GetInfo's answer comes from the network: out-of-range values are refused by name and
// change nothing.
TEST(DcSessionTest, HostileDaemonValuesAreRefusedNamingTheField) {
  struct Case {
    gdrstore::v1::DcInfo info;
    const char* field;
  } cases[] = {
      {Info(1500, 0, 0, 64), "rdma.dc.mtu"},
      {Info(1024, 256, 0, 64), "rdma.dc.traffic_class"},
      {Info(1024, 0, 16, 64), "rdma.dc.service_level"},
      {Info(1024, 0, 0, 256), "rdma.dc.hop_limit"},
  };
  for (const Case& c : cases) {
    DcSessionOptions o;
    absl::Status s = ApplyDaemonDcInfo(c.info, &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s;
    EXPECT_EQ(o.daemon_mtu, 0u);
    EXPECT_EQ(o.dct.traffic_class, 0);
  }
}

}  // namespace
}  // namespace gdr
