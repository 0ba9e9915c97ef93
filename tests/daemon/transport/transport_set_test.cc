// The TransportSet is the only way the daemon reaches its transports after start-up, so a
// transport added to it must show up everywhere: routing, health, drain, shutdown, client
// counts, log names, GetInfo and GetStats. dc cannot run on this machine (no mlx5 device), so a
// fake initiator stands in for it; the real DcInitiator's figures are tested against a fake
// device in dc/dc_initiator_test.cc.
#include "daemon/transport/transport_set.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/daemon/transport/fake_initiator.h"

namespace gdr {
namespace {

namespace v1 = gdrstore::v1;
using ::gdr::testing::FakeInitiator;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

InitiatorStats Stats(uint32_t in_use, uint32_t capacity, uint32_t clients, uint64_t in_flight,
                     uint64_t errors = 0, uint64_t recoveries = 0) {
  InitiatorStats s;
  s.in_use = in_use;
  s.capacity = capacity;
  s.clients = clients;
  s.in_flight = in_flight;
  s.errors = errors;
  s.recoveries = recoveries;
  return s;
}

TransferOp OpOf(TransportKind kind) {
  TransferOp op;
  op.transport = kind;
  op.length = 1;
  return op;
}

struct ThreeTransports {
  ThreeTransports() {
    set.Add(std::make_unique<FakeInitiator>(TransportKind::kTcp, Stats(3, 64, 2, 5), &calls));
    set.Add(std::make_unique<FakeInitiator>(TransportKind::kRc, Stats(8, 256, 4, 1, 2, 1), &calls));
    set.Add(std::make_unique<FakeInitiator>(TransportKind::kDc, Stats(16, 16, 7, 9, 3, 2), &calls));
  }
  std::vector<std::string> calls;
  TransportSet set;
};

TEST(TransportSetTest, DcAppearsInNamesAndClientCounts) {
  ThreeTransports t;
  EXPECT_EQ(t.set.Names(), "tcp, rc, dc");
  EXPECT_EQ(t.set.clients(), 2u + 4u + 7u);
  const OfferedTransports o = t.set.offered();
  EXPECT_TRUE(o.Has(TransportKind::kTcp) && o.Has(TransportKind::kRc) &&
              o.Has(TransportKind::kDc));

  TransportSet tcp_only;
  tcp_only.Add(std::make_unique<FakeInitiator>(TransportKind::kTcp, Stats(1, 64, 1, 0), nullptr));
  EXPECT_EQ(tcp_only.Names(), "tcp");
  EXPECT_FALSE(tcp_only.offered().Has(TransportKind::kDc));
  EXPECT_EQ(TransportSet().Names(), "none");
}

TEST(TransportSetTest, GetStatsCarriesEveryRunningTransportsPool) {
  ThreeTransports t;
  v1::GetStatsResponse r;
  // DaemonStats adds one entry per transport for the op counters first; the pool goes there.
  r.add_transports()->set_transport(v1::TRANSPORT_TCP);
  t.set.FillStats(&r);
  ASSERT_EQ(r.transports_size(), 3);
  std::map<v1::Transport, v1::PoolStats> pools;
  for (const v1::TransportStats& s : r.transports()) pools[s.transport()] = s.pool();
  EXPECT_EQ(pools[v1::TRANSPORT_TCP].in_use(), 3u);
  EXPECT_EQ(pools[v1::TRANSPORT_TCP].capacity(), 64u);
  EXPECT_EQ(pools[v1::TRANSPORT_TCP].destinations(), 2u);
  EXPECT_EQ(pools[v1::TRANSPORT_RC].in_use(), 8u);
  EXPECT_EQ(pools[v1::TRANSPORT_RC].errors(), 2u);
  const v1::PoolStats& dc = pools[v1::TRANSPORT_DC];
  EXPECT_EQ(dc.in_use(), 16u);
  EXPECT_EQ(dc.capacity(), 16u);
  EXPECT_EQ(dc.destinations(), 7u);
  EXPECT_EQ(dc.inflight_ops(), 9u);
  EXPECT_EQ(dc.errors(), 3u);
  EXPECT_EQ(dc.recoveries(), 2u);
}

TEST(TransportSetTest, GetInfoListsEveryTransportWithItsLineOrWhyItIsAbsent) {
  TransportSet set;
  set.Add(std::make_unique<FakeInitiator>(TransportKind::kTcp, Stats(0, 64, 0, 0), nullptr));
  set.Add(std::make_unique<FakeInitiator>(TransportKind::kDc, Stats(16, 16, 0, 0), nullptr));
  set.SetAbsent(TransportKind::kRc, "disabled by configuration (--rc off)");
  v1::GetInfoResponse info;
  set.FillInfo(&info);
  ASSERT_EQ(info.transports_size(), 4);  // every kind, running or not
  std::map<v1::Transport, v1::TransportInfo> by;
  for (const v1::TransportInfo& t : info.transports()) by[t.transport()] = t;
  EXPECT_TRUE(by[v1::TRANSPORT_DC].available());
  EXPECT_EQ(by[v1::TRANSPORT_DC].detail(), "fake dc with 16 channels");
  EXPECT_FALSE(by[v1::TRANSPORT_RC].available());
  EXPECT_EQ(by[v1::TRANSPORT_RC].detail(), "disabled by configuration (--rc off)");
  EXPECT_TRUE(by[v1::TRANSPORT_TCP].available());
  EXPECT_FALSE(by[v1::TRANSPORT_LOCAL].available());
  EXPECT_EQ(by[v1::TRANSPORT_LOCAL].detail(), "not configured");
  EXPECT_FALSE(info.has_local()) << "no local transport runs";
  EXPECT_FALSE(info.has_rdma()) << "no verbs core was given";
  EXPECT_EQ(set.Describe(TransportKind::kRc), "disabled by configuration (--rc off)");
}

TEST(TransportSetTest, OpsGoToTheirTransportAndAMissingOneIsNamed) {
  TransportSet set;
  std::vector<std::string> calls;
  set.Add(std::make_unique<FakeInitiator>(TransportKind::kTcp, Stats(0, 1, 0, 0), &calls));
  set.Add(std::make_unique<FakeInitiator>(TransportKind::kDc, Stats(0, 1, 0, 0), &calls));
  int done = 0;
  EXPECT_TRUE(set.Submit(OpOf(TransportKind::kDc), [&](absl::Status) { ++done; }).ok());
  absl::Status rc = set.Submit(OpOf(TransportKind::kRc), [&](absl::Status) { ++done; });
  EXPECT_EQ(rc.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(rc.message(), HasSubstr("transport rc is not running"));
  EXPECT_EQ(done, 1);

  std::vector<Submission> batch(4);
  const TransportKind kinds[] = {TransportKind::kTcp, TransportKind::kRc, TransportKind::kDc,
                                 TransportKind::kTcp};
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].op = OpOf(kinds[i]);
    batch[i].done = [&](absl::Status) { ++done; };
  }
  set.SubmitBatch(batch);
  EXPECT_TRUE(batch[0].status.ok());
  EXPECT_EQ(batch[1].status.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(batch[2].status.ok());
  EXPECT_TRUE(batch[3].status.ok());
  EXPECT_EQ(done, 4);
  EXPECT_THAT(calls, ElementsAre("dc:Submit", "tcp:Submit", "tcp:Submit", "dc:Submit"));
}

TEST(TransportSetTest, EachEndpointIsReadByItsOwnTransport) {
  TransportSet set;
  auto tcp = std::make_unique<FakeInitiator>(TransportKind::kTcp, Stats(0, 1, 0, 0), nullptr);
  tcp->set_parser([](const v1::RemoteBuffer& b)
                      -> absl::StatusOr<std::shared_ptr<const Destination>> {
    return absl::InvalidArgumentError(absl::StrCat("tcp read port ", b.tcp().port()));
  });
  set.Add(std::move(tcp));
  set.Add(std::make_unique<FakeInitiator>(TransportKind::kDc, Stats(0, 1, 0, 0), nullptr));
  v1::RemoteBuffer buffer;
  buffer.mutable_tcp()->set_port(7);
  EXPECT_EQ(set.ParseDestination(TransportKind::kTcp, buffer).status().message(),
            "tcp read port 7");
  absl::StatusOr<std::shared_ptr<const Destination>> dc =
      set.ParseDestination(TransportKind::kDc, buffer);
  ASSERT_TRUE(dc.ok()) << dc.status();
  EXPECT_EQ((*dc)->transport(), TransportKind::kDc);
  absl::Status rc = set.ParseDestination(TransportKind::kRc, buffer).status();
  EXPECT_EQ(rc.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(rc.message(), HasSubstr("transport rc is not running"));
}

TEST(TransportSetTest, HealthDrainAndShutdownReachEveryTransport) {
  ThreeTransports t;
  EXPECT_TRUE(t.set.CheckHealth(absl::Seconds(1)).ok());
  static_cast<FakeInitiator*>(t.set.Find(TransportKind::kDc))
      ->set_health(absl::UnavailableError("dc: DCI poller stuck"));
  EXPECT_EQ(t.set.CheckHealth(absl::Seconds(1)).message(), "dc: DCI poller stuck");
  t.set.StartDrain();
  t.set.Shutdown();
  // Shutdown runs in the reverse of the order of Add.
  EXPECT_THAT(t.calls, ElementsAre("tcp:StartDrain", "rc:StartDrain", "dc:StartDrain",
                                   "dc:Shutdown", "rc:Shutdown", "tcp:Shutdown"));
}

}  // namespace
}  // namespace gdr
