// What a device's async events say about one port's activity (the part of PortWatch that needs
// no device; PortWatch on a real port is in verbs_core_test, in the SoftRoCE guest).
#include "common/verbs/port_watch.h"

#include <gtest/gtest.h>

namespace gdr::verbs {
namespace {

ibv_async_event PortEvent(ibv_event_type type, int port) {
  ibv_async_event e{};
  e.event_type = type;
  e.element.port_num = port;
  return e;
}

TEST(PortEventActivityTest, PortErrAndPortActiveOfThisPort) {
  EXPECT_EQ(PortEventActivity(PortEvent(IBV_EVENT_PORT_ERR, 1), 1), false);
  EXPECT_EQ(PortEventActivity(PortEvent(IBV_EVENT_PORT_ACTIVE, 1), 1), true);
}

TEST(PortEventActivityTest, AnotherPortsEventsSayNothing) {
  EXPECT_EQ(PortEventActivity(PortEvent(IBV_EVENT_PORT_ERR, 2), 1), std::nullopt);
  EXPECT_EQ(PortEventActivity(PortEvent(IBV_EVENT_PORT_ACTIVE, 2), 1), std::nullopt);
}

TEST(PortEventActivityTest, ADeviceFatalErrorTakesEveryPortDown) {
  ibv_async_event e{};
  e.event_type = IBV_EVENT_DEVICE_FATAL;
  EXPECT_EQ(PortEventActivity(e, 1), false);
  EXPECT_EQ(PortEventActivity(e, 2), false);
}

TEST(PortEventActivityTest, OtherEventsSayNothingAboutActivity) {
  for (ibv_event_type t : {IBV_EVENT_GID_CHANGE, IBV_EVENT_LID_CHANGE, IBV_EVENT_PKEY_CHANGE,
                           IBV_EVENT_SM_CHANGE, IBV_EVENT_CLIENT_REREGISTER}) {
    EXPECT_EQ(PortEventActivity(PortEvent(t, 1), 1), std::nullopt) << ibv_event_type_str(t);
  }
  ibv_async_event qp{};
  qp.event_type = IBV_EVENT_QP_FATAL;
  EXPECT_EQ(PortEventActivity(qp, 1), std::nullopt);
}

}  // namespace
}  // namespace gdr::verbs
