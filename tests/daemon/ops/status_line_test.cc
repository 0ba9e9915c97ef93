// The systemd STATUS line counts the clients of every transport the daemon runs and names them
// all: dc (a fake initiator here, standing in for an mlx5 DCI pool) is counted like tcp and rc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/ops/supervisor.h"
#include "tests/daemon/transport/fake_initiator.h"

namespace gdr {
namespace {

using ::gdr::testing::FakeInitiator;
using ::testing::HasSubstr;

InitiatorStats WithClients(uint32_t clients) {
  InitiatorStats s;
  s.clients = clients;
  return s;
}

TEST(StatusLineTest, CountsTheClientsOfEveryTransportDcIncluded) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Create({{"vol0", 1 << 20, {}, {}}});
  ASSERT_TRUE(store.ok()) << store.status();
  TransportSet transports;
  transports.Add(std::make_unique<FakeInitiator>(TransportKind::kTcp, WithClients(1), nullptr));
  transports.Add(std::make_unique<FakeInitiator>(TransportKind::kRc, WithClients(2), nullptr));
  StoreService service(store->get(), &transports, ServiceLimits{});
  SupervisedDaemon d;
  d.service = &service;
  d.transports = &transports;
  d.serving = "serving on 127.0.0.1:1, transports " + transports.Names();
  EXPECT_THAT(StatusLine(d), HasSubstr("transports tcp, rc; 3 clients, 0 ops in flight"));

  TransportSet with_dc;
  with_dc.Add(std::make_unique<FakeInitiator>(TransportKind::kTcp, WithClients(1), nullptr));
  with_dc.Add(std::make_unique<FakeInitiator>(TransportKind::kRc, WithClients(2), nullptr));
  with_dc.Add(std::make_unique<FakeInitiator>(TransportKind::kDc, WithClients(5), nullptr));
  StoreService service_dc(store->get(), &with_dc, ServiceLimits{});
  d.service = &service_dc;
  d.transports = &with_dc;
  d.serving = "serving on 127.0.0.1:1, transports " + with_dc.Names();
  EXPECT_THAT(StatusLine(d), HasSubstr("transports tcp, rc, dc; 8 clients, 0 ops in flight"));
}

}  // namespace
}  // namespace gdr
