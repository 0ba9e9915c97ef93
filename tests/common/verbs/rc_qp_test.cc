// The rc transition builder from port attributes alone (no device needed): the address vector
// of an RC QP carries the traffic class and SL both ends agreed on (the daemon's, RcAccept), so
// the client's READ responses and ACKs travel in the class of the daemon's requests.
#include "common/verbs/rc_qp.h"

#include <gtest/gtest.h>

namespace gdr::verbs {
namespace {

PortInfo Port(uint8_t link_layer) {
  PortInfo p;
  p.port = 1;
  p.link_layer = link_layer;
  p.active_mtu = IBV_MTU_4096;
  p.gid_index = 1;
  return p;
}

ibv_device_attr Attr() {
  ibv_device_attr a{};
  a.max_qp_rd_atom = 16;
  a.max_qp_init_rd_atom = 16;
  return a;
}

TEST(RcTransitionsTest, RtrCarriesTheConfiguredTrafficClassAndSl) {
  RcQpConfig cfg;
  cfg.traffic_class = 96;
  cfg.service_level = 5;
  RcPeer peer;
  peer.qp_num = 0x11;
  peer.mtu = IBV_MTU_1024;
  peer.gid[15] = 7;
  auto steps = RcTransitions(Port(IBV_LINK_LAYER_ETHERNET), Attr(), cfg, 0x123, peer);
  ASSERT_EQ(steps.size(), 3u);
  const ibv_qp_attr& rtr = steps[1].attr;
  EXPECT_TRUE(steps[1].mask & IBV_QP_AV);
  EXPECT_EQ(rtr.ah_attr.is_global, 1);
  EXPECT_EQ(rtr.ah_attr.grh.traffic_class, 96);
  EXPECT_EQ(rtr.ah_attr.sl, 5);
  EXPECT_EQ(rtr.ah_attr.grh.dgid.raw[15], 7);
  EXPECT_EQ(rtr.path_mtu, IBV_MTU_1024) << "the smaller of the two ports'";
}

TEST(RcTransitionsTest, InfinibandTakesTheSlWithoutAGrh) {
  RcQpConfig cfg;
  cfg.traffic_class = 96;
  cfg.service_level = 5;
  RcPeer peer;
  peer.lid = 9;
  auto steps = RcTransitions(Port(IBV_LINK_LAYER_INFINIBAND), Attr(), cfg, 0x123, peer);
  EXPECT_EQ(steps[1].attr.ah_attr.is_global, 0);
  EXPECT_EQ(steps[1].attr.ah_attr.dlid, 9);
  EXPECT_EQ(steps[1].attr.ah_attr.sl, 5);
}

TEST(RcTransitionsTest, DefaultsLeaveTheDefaultClass) {
  RcPeer peer;
  auto steps = RcTransitions(Port(IBV_LINK_LAYER_ETHERNET), Attr(), RcQpConfig{}, 1, peer);
  EXPECT_EQ(steps[1].attr.ah_attr.grh.traffic_class, 0);
  EXPECT_EQ(steps[1].attr.ah_attr.sl, 0);
}

// What rc's RcHello/RcQpReady/RcResetQp checks and dc's DcEndpoint check all take from the wire.
TEST(QpNumberTest, TwentyFourBitsAndNotZero) {
  EXPECT_FALSE(IsQpNumber(0));
  EXPECT_TRUE(IsQpNumber(1));
  EXPECT_TRUE(IsQpNumber(0xFFFFFF));
  EXPECT_FALSE(IsQpNumber(0x1000000));
  EXPECT_FALSE(IsQpNumber(0xFFFFFFFF));
}

}  // namespace
}  // namespace gdr::verbs
