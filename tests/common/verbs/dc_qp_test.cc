// The dc part of the verbs core. The transition attributes are checked against the mlx5
// kernel driver's contract (mlx5_ib_modify_dct's required masks for a DCT; the RC-like masks a
// DCI takes) on whatever verbs device exists; ProbeDc on a non-mlx5 device (SoftRoCE in the
// test guest) must name the missing capability. Without a device those tests skip.
#include "common/verbs/dc_qp.h"

#include <gtest/gtest.h>

#include <set>

#include "absl/strings/match.h"
#include "common/verbs/completion_poller.h"

namespace gdr::verbs {
namespace {

#define SKIP_WITHOUT_DEVICE() \
  if (ListDeviceNames().empty()) GTEST_SKIP() << "no verbs device";

TEST(DcKeyTest, KeysAreRandomAndNeverZero) {
  std::set<uint64_t> keys;
  for (int i = 0; i < 64; ++i) {
    absl::StatusOr<uint64_t> k = RandomDcKey();
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_NE(*k, 0u);
    keys.insert(*k);
  }
  EXPECT_EQ(keys.size(), 64u) << "64 draws of 64 random bits collided";
}

PortInfo RocePort(ibv_mtu active) {
  PortInfo p;
  p.port = 1;
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  p.active_mtu = active;
  p.gid_index = 3;
  return p;
}

// The DCT answers with its own address vector: READ responses and ACKs leave with its class
// and SL, and are cut at its path MTU. All three must be the daemon's DCIs' (GetInfo rdma.dc),
// not the defaults (DSCP 0 / PCP 0) and not this port's MTU alone.
TEST(DcTransitionsTest, DctRtrCarriesTheDaemonsClassSlAndPathMtu) {
  DctConfig cfg;
  cfg.traffic_class = 106;
  cfg.service_level = 3;
  cfg.hop_limit = 9;
  cfg.path_mtu = IBV_MTU_1024;
  auto steps = DctTransitions(RocePort(IBV_MTU_4096), cfg);
  ASSERT_EQ(steps.size(), 2u);
  const ibv_qp_attr& rtr = steps[1].attr;
  EXPECT_EQ(steps[1].mask, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU);
  EXPECT_EQ(rtr.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(rtr.ah_attr.sl, 3);
  EXPECT_EQ(rtr.ah_attr.is_global, 1);
  EXPECT_EQ(rtr.ah_attr.grh.traffic_class, 106);
  EXPECT_EQ(rtr.ah_attr.grh.hop_limit, 9);
  EXPECT_EQ(rtr.ah_attr.grh.sgid_index, 3);
  // Without a daemon MTU the port's active MTU stands.
  cfg.path_mtu.reset();
  EXPECT_EQ(DctTransitions(RocePort(IBV_MTU_2048), cfg)[1].attr.path_mtu, IBV_MTU_2048);
}

TEST(DcTransitionsTest, DciRtrUsesTheConfiguredPathMtu) {
  DciConfig cfg;
  cfg.path_mtu = IBV_MTU_1024;
  auto steps = DciTransitions(RocePort(IBV_MTU_4096), cfg);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[1].attr.path_mtu, IBV_MTU_1024);
  cfg.path_mtu.reset();
  EXPECT_EQ(DciTransitions(RocePort(IBV_MTU_4096), cfg)[1].attr.path_mtu, IBV_MTU_4096);
}

TEST(DcTransitionsTest, TheDctTakesTheSmallerOfItsPortAndTheDaemonsMtu) {
  EXPECT_EQ(DctPathMtu(IBV_MTU_4096, 1024), IBV_MTU_1024);
  EXPECT_EQ(DctPathMtu(IBV_MTU_1024, 4096), IBV_MTU_1024)
      << "above the port's it could not send; the daemon then refuses the mismatch by name";
  EXPECT_EQ(DctPathMtu(IBV_MTU_2048, 2048), IBV_MTU_2048);
  EXPECT_EQ(DctPathMtu(IBV_MTU_2048, 0), IBV_MTU_2048) << "a daemon that does not say";
  EXPECT_EQ(DctPathMtu(IBV_MTU_2048, 1500), IBV_MTU_2048) << "not a path MTU: ignored";
}

class DcQpDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_DEVICE();
    DeviceSelector sel;
    auto d = VerbsDevice::Open(sel);
    ASSERT_TRUE(d.ok()) << d.status();
    device_ = std::move(*d);
  }
  std::unique_ptr<VerbsDevice> device_;
};

TEST_F(DcQpDeviceTest, DctTransitionsCarryTheMasksTheMlx5DriverRequires) {
  DctConfig cfg;
  cfg.hop_limit = 9;
  cfg.traffic_class = 106;
  auto steps = DctTransitions(*device_, cfg);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(steps[0].mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  EXPECT_EQ(steps[0].attr.qp_access_flags, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(steps[0].attr.port_num, device_->port().port);
  EXPECT_EQ(steps[1].attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(steps[1].mask, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU);
  EXPECT_EQ(steps[1].attr.path_mtu, device_->port().active_mtu);
  if (device_->is_roce()) {
    EXPECT_EQ(steps[1].attr.ah_attr.is_global, 1);
    EXPECT_EQ(steps[1].attr.ah_attr.grh.sgid_index, device_->port().gid_index);
    EXPECT_EQ(steps[1].attr.ah_attr.grh.hop_limit, 9);
    EXPECT_EQ(steps[1].attr.ah_attr.grh.traffic_class, 106);
  }
}

TEST_F(DcQpDeviceTest, DciTransitionsGoToRtsWithTheReadDepthAsked) {
  DciConfig cfg;
  cfg.max_rd_atomic = 16;
  cfg.timeout = 18;
  auto steps = DciTransitions(*device_, cfg);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT)
      << "a DCI takes no access flags: it only initiates";
  EXPECT_EQ(steps[1].mask, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV)
      << "a DCI has no destination QP or PSN: the address comes per work request";
  EXPECT_EQ(steps[2].attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(steps[2].mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  EXPECT_EQ(steps[2].attr.max_rd_atomic, 16);
  EXPECT_EQ(steps[2].attr.timeout, 18);
}

TEST_F(DcQpDeviceTest, ProbeNamesWhatANonMlx5DeviceLacks) {
  auto poller = CompletionPoller::Create(device_->context(), PollerOptions{}, "dc_qp_test");
  ASSERT_TRUE(poller.ok()) << poller.status();
  const DcProbe p = ProbeDc(*device_, (*poller)->cq());
  if (p.mlx5 && p.dc) GTEST_SKIP() << device_->name() << " can do DC: nothing is missing";
  EXPECT_FALSE(p.why_not.empty());
  EXPECT_TRUE(absl::StrContains(p.why_not, device_->name())) << p.why_not;
  if (BuiltWithMlx5dv() && !p.mlx5) {
    EXPECT_TRUE(absl::StrContains(p.why_not, "mlx5dv_is_supported")) << p.why_not;
  }
  // And creating a DCT is refused, not crashed into.
  auto dct = CreateDct(*device_, (*poller)->cq(), 0x1234, DctConfig{});
  EXPECT_FALSE(dct.ok());
}

}  // namespace
}  // namespace gdr::verbs
