// DcInitiator through its device seam: the fake stands in for a ConnectX and models the
// mlx5 error contract (see fake_dc_device.h). These tests cover the logic only; nothing here
// shows that the DC path works on hardware.
// Over 600 lines because: each case walks one row of the mlx5 error contract through the same
// fake device and fixture; they read as one table and share helpers nothing else uses.
#include "daemon/transport/dc/dc_initiator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "daemon/transport/dc/mlx5_dc_device.h"
#include "tests/daemon/transport/dc/fake_dc_device.h"

namespace gdr::dc {
namespace {

using testing::FakeDcDevice;
using testing::PostedWr;

constexpr uint32_t kLkey = 0x4242;
constexpr uint64_t kSecretKey = 0x5eC2e7D00dF00dULL;

// `op`'s DC destination with another path MTU (destinations are shared, so never edited).
std::shared_ptr<const DcDestination> WithMtu(const TransferOp& op, uint32_t mtu) {
  DcDestination d = *DestinationOf<DcDestination>(op);
  d.mtu = mtu;
  return std::make_shared<const DcDestination>(d);
}

struct Harness {
  explicit Harness(DcCaps caps = FakeDcDevice::ConnectX6Caps(), DcInitiatorOptions opt = {}) {
    auto dev = std::make_unique<FakeDcDevice>(std::move(caps));
    fake = dev.get();
    fake->ReportDciCountOnDestruction(&dcis_of_refused_device);
    store.resize(64 << 20);
    auto init = DcInitiator::Create(std::move(dev), opt, [this](const TransferOp& op)
                                        -> absl::StatusOr<uint32_t> {
      const std::byte* p = op.local;
      const uint64_t n = op.length;
      if (p < store.data() || p + n > store.data() + store.size()) {
        return absl::FailedPreconditionError("memory not registered");
      }
      return kLkey;
    });
    status = init.status();
    if (init.ok()) {
      initiator = std::move(*init);
    } else {
      fake = nullptr;  // the refused Create destroyed the device
    }
  }

  TransferOp Op(Direction dir, uint64_t offset, uint64_t length, uint32_t dct = 0x1234,
                uint8_t gid_last = 1) {
    TransferOp op;
    op.direction = dir;
    op.volume = "v";
    op.offset = offset;
    op.local = store.data() + offset;
    op.length = length;
    op.remote_address = 0x7f0000000000ull + offset;
    op.rkey = 0xabcd;
    DcDestination dest;
    dest.key.dct_number = dct;
    dest.key.addr.gid = {0xfe, 0x80};
    dest.key.addr.gid[15] = gid_last;
    dest.access_key = DcAccessKey(kSecretKey);
    op.destination = std::make_shared<const DcDestination>(dest);
    return op;
  }

  // Submits and records the outcome under `id`.
  absl::Status Submit(const TransferOp& op, int id) {
    return initiator->Submit(op, [this, id](absl::Status s) {
      absl::MutexLock lock(&mu);
      EXPECT_EQ(results.count(id), 0u) << "op " << id << " completed twice";
      results[id] = std::move(s);
    });
  }
  std::optional<absl::Status> Result(int id) {
    absl::MutexLock lock(&mu);
    auto it = results.find(id);
    if (it == results.end()) return std::nullopt;
    return it->second;
  }

  // Declared before the initiator: its Shutdown (in its destructor) still reports results.
  absl::Mutex mu;
  std::map<int, absl::Status> results;
  std::vector<std::byte> store;
  size_t dcis_of_refused_device = 0;  // DCIs the device held when a refused Create destroyed it
  FakeDcDevice* fake = nullptr;
  absl::Status status;
  std::unique_ptr<DcInitiator> initiator;
};

DcInitiatorOptions Small(uint32_t dcis = 4, uint32_t depth = 8) {
  DcInitiatorOptions o;
  o.dci_count = dcis;
  o.dci.sq_depth = depth;
  o.chunk_bytes = 1 << 20;
  o.max_op_bytes = 4 << 20;
  return o;
}

TEST(DcInitiatorTest, RefusesANonMlx5DeviceNamingTheCapability) {
  DcCaps caps;
  caps.mlx5 = false;
  caps.why_not = "rxe0 is not an mlx5 device (mlx5dv_is_supported() is false)";
  Harness h(caps);
  EXPECT_EQ(h.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(h.status.message().find("mlx5dv_is_supported"), std::string::npos) << h.status;
  EXPECT_NE(h.status.message().find("rxe0"), std::string::npos) << h.status;
}

TEST(DcInitiatorTest, RefusesAnMlx5DeviceWithoutDc) {
  DcCaps caps = FakeDcDevice::ConnectX6Caps();
  caps.dc = false;
  caps.why_not = "mlx5dv_create_qp(MLX5DV_DCTYPE_DCI) failed: Operation not supported";
  Harness h(caps);
  EXPECT_EQ(h.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(h.status.message().find("MLX5DV_DCTYPE_DCI"), std::string::npos) << h.status;
}

TEST(DcInitiatorTest, DciCountIsBoundedByTheDevice) {
  DcCaps caps = FakeDcDevice::ConnectX6Caps();
  caps.max_qp = 64;
  DcInitiatorOptions o = Small();
  o.dci_count = 33;
  Harness h(caps, o);
  EXPECT_EQ(h.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(h.status.message().find("--dci-count 33"), std::string::npos) << h.status;
  o.dci_count = 0;
  Harness zero(caps, o);
  EXPECT_EQ(zero.status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(DcInitiatorTest, DefaultPoolIsSixteenDcisAtRtsWithReadDepthFromTheCaps) {
  DcCaps caps = FakeDcDevice::ConnectX6Caps();
  caps.max_qp_rd_atom = 16;
  caps.max_qp_wr = 64;
  DcInitiatorOptions o;
  o.dci.sq_depth = 32;
  o.max_op_bytes = 64 << 20;
  Harness h(caps, o);
  ASSERT_TRUE(h.status.ok()) << h.status;
  EXPECT_EQ(h.fake->dci_count(), 16u);
  const DciSettings s = h.fake->dci_settings(0);
  EXPECT_EQ(s.max_rd_atomic, 16) << "the seed's 1 serialized every RDMA READ";
  EXPECT_EQ(s.sq_depth, 32u) << "half of max_qp_wr: a DCI WR takes two slots";
  EXPECT_EQ(s.log_streams, 0) << "this device reports no DCI streams";
  EXPECT_EQ(h.initiator->effective().dci_count, 16u);
}

// mlx5 sizes a send queue in 64-byte WQE basic blocks and a DCI WQE (with its address vector)
// takes two, so a DCI holds at most max_qp_wr / 2 WRs: above that mlx5dv_create_qp fails with
// EINVAL. The old cap (max_qp_wr itself) let such depths through to that failure.
TEST(DcInitiatorTest, SqDepthAboveHalfMaxQpWrIsRefusedSayingWhy) {
  DcCaps caps = FakeDcDevice::ConnectX6Caps();  // max_qp_wr 32768
  DcInitiatorOptions o = Small(2, 16385);
  Harness h(caps, o);
  ASSERT_EQ(h.status.code(), absl::StatusCode::kInvalidArgument) << h.status;
  EXPECT_NE(h.status.message().find("--dc-sq-depth 16385"), std::string::npos) << h.status;
  EXPECT_NE(h.status.message().find("16384"), std::string::npos) << h.status;
  EXPECT_NE(h.status.message().find("two"), std::string::npos) << h.status;
  EXPECT_EQ(h.dcis_of_refused_device, 0u) << "refused before any DCI was created";

  Harness ok(caps, Small(2, 16384));
  ASSERT_TRUE(ok.status.ok()) << ok.status;
  EXPECT_EQ(ok.fake->dci_settings(0).sq_depth, 16384u);

  caps.max_qp_wr = 100;  // not a power of two: the provider rounds the queue up to one
  Harness odd(caps, Small(2, 33));
  EXPECT_EQ(odd.status.code(), absl::StatusCode::kInvalidArgument) << odd.status;
  Harness odd_ok(caps, Small(2, 32));
  EXPECT_TRUE(odd_ok.status.ok()) << odd_ok.status;
}

// Kernels since 6.2 check a DCI's max_rd_atomic against the DC initiator limit at RTR->RTS;
// where it is below RC's, a DCI capped by RC's fails with EINVAL (the fake refuses it too).
TEST(DcInitiatorTest, ReadDepthIsCappedByTheDcLimitWhereItIsBelowRcs) {
  DcCaps caps = FakeDcDevice::ConnectX6Caps();
  caps.max_qp_rd_atom = 16;
  caps.max_dc_init_rd_atom = 8;
  DcInitiatorOptions o = Small();
  o.dci.max_rd_atomic = 16;
  Harness h(caps, o);
  ASSERT_TRUE(h.status.ok()) << h.status;
  EXPECT_EQ(h.fake->dci_settings(0).max_rd_atomic, 8);
  EXPECT_EQ(h.initiator->effective().max_rd_atomic, 8);

  caps.max_dc_init_rd_atom = 0;  // not reported (rdma-core < 47): RC's limit, as before
  Harness rc(caps, o);
  ASSERT_TRUE(rc.status.ok()) << rc.status;
  EXPECT_EQ(rc.fake->dci_settings(0).max_rd_atomic, 16);

  caps.max_qp_rd_atom = 4;  // RC's below DC's: the smaller still wins
  caps.max_dc_init_rd_atom = 8;
  Harness low(caps, o);
  ASSERT_TRUE(low.status.ok()) << low.status;
  EXPECT_EQ(low.fake->dci_settings(0).max_rd_atomic, 4);
}

TEST(DcInitiatorTest, DciPathMtuIsDcMtuBoundedByThePort) {
  DcCaps caps = FakeDcDevice::ConnectX6Caps();  // port MTU 4096
  DcInitiatorOptions o = Small();
  Harness port(caps, o);
  ASSERT_TRUE(port.status.ok()) << port.status;
  EXPECT_EQ(port.fake->dci_settings(0).mtu, 4096u) << "default: the port's active MTU";
  EXPECT_EQ(port.initiator->effective().mtu, 4096u);

  o.mtu = 1024;
  Harness dc_mtu(caps, o);
  ASSERT_TRUE(dc_mtu.status.ok()) << dc_mtu.status;
  EXPECT_EQ(dc_mtu.fake->dci_settings(0).mtu, 1024u);
  EXPECT_NE(dc_mtu.initiator->Describe().find("path MTU 1024"), std::string::npos);

  caps.port_active_mtu = 1024;
  o.mtu = 4096;
  Harness above(caps, o);
  EXPECT_EQ(above.status.code(), absl::StatusCode::kInvalidArgument) << above.status;
  EXPECT_NE(above.status.message().find("--dc-mtu 4096"), std::string::npos) << above.status;
}

// READ responses' middle packets are exactly one path MTU: a DCT on another MTU than the DCIs'
// cannot be served, and the client is told what to change instead of timing out.
TEST(DcInitiatorTest, AnEndpointWithAnotherMtuIsRefusedNamingBothAndTheFix) {
  DcInitiatorOptions o = Small();
  o.mtu = 1024;
  Harness h(FakeDcDevice::ConnectX6Caps(), o);
  ASSERT_TRUE(h.status.ok()) << h.status;
  TransferOp op = h.Op(Direction::kClientToStore, 0, 4096);
  op.destination = WithMtu(op, 4096);
  absl::Status s = h.Submit(op, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("buffer.dc.mtu 4096"), std::string::npos) << s;
  EXPECT_NE(s.message().find("1024"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--dc-mtu"), std::string::npos) << s;
  EXPECT_TRUE(h.fake->posted().empty());

  op.destination = WithMtu(op, 1024);
  EXPECT_TRUE(h.Submit(op, 2).ok());
  op.destination = WithMtu(op, 0);  // an older client that does not say: taken to be ours
  EXPECT_TRUE(h.Submit(op, 3).ok());
  h.fake->CompleteAll();
}

TEST(DcInitiatorTest, GetInfoAdvertisesWhatTheDctMustMatch) {
  DcInitiatorOptions o = Small();
  o.mtu = 2048;
  o.ah.traffic_class = 106;
  o.ah.service_level = 3;
  o.ah.hop_limit = 9;
  Harness h(FakeDcDevice::ConnectX6Caps(), o);
  ASSERT_TRUE(h.status.ok()) << h.status;
  gdrstore::v1::GetInfoResponse info;
  h.initiator->FillInfo(&info);
  ASSERT_TRUE(info.rdma().has_dc());
  EXPECT_EQ(info.rdma().dc().mtu(), 2048u);
  EXPECT_EQ(info.rdma().dc().traffic_class(), 106u);
  EXPECT_EQ(info.rdma().dc().service_level(), 3u);
  EXPECT_EQ(info.rdma().dc().hop_limit(), 9u);
}

TEST(DcCapsTest, CapsFromProbeCarriesTheDcReadDepthAndThePortMtu) {
  verbs::DcProbe probe;
  probe.mlx5 = probe.dc = true;
  probe.max_qp_wr = 32768;
  probe.max_qp_init_rd_atom = 16;
  probe.max_dc_init_rd_atom = 8;
  verbs::PortInfo port;
  port.port = 1;
  port.active_mtu = IBV_MTU_2048;
  port.max_msg_size = 1u << 30;
  const DcCaps c = CapsFromProbe(probe, "mlx5_0", port);
  EXPECT_EQ(c.max_qp_rd_atom, 16);
  EXPECT_EQ(c.max_dc_init_rd_atom, 8);
  EXPECT_EQ(c.port_active_mtu, 2048u);
  EXPECT_EQ(c.where, "mlx5_0 port 1");
}

TEST(DcInitiatorTest, UsesDciStreamsWhereTheDeviceReportsThem) {
  DcCaps caps = FakeDcDevice::ConnectX6Caps();
  caps.max_log_num_concurent = 3;
  caps.max_log_num_errored = 1;
  Harness h(caps, Small());
  ASSERT_TRUE(h.status.ok()) << h.status;
  const DciSettings s = h.fake->dci_settings(0);
  EXPECT_EQ(s.log_streams, 3) << "wanted 4, capped at the device's 3";
  EXPECT_EQ(s.log_errored, 1);
  EXPECT_EQ(h.initiator->effective().streams_per_dci, 8u);

  DcInitiatorOptions off = Small();
  off.use_streams = false;
  Harness h2(caps, off);
  ASSERT_TRUE(h2.status.ok());
  EXPECT_EQ(h2.fake->dci_settings(0).log_streams, 0);
}

TEST(DcInitiatorTest, TheLargestOpMustFitThePool) {
  DcInitiatorOptions o = Small(2, 4);
  o.max_op_bytes = 9 << 20;  // 9 chunks > 2 x 4 slots
  Harness h(FakeDcDevice::ConnectX6Caps(), o);
  EXPECT_EQ(h.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(h.status.message().find("--dci-count"), std::string::npos) << h.status;
}

TEST(DcInitiatorTest, DciCreationFailureNamesTheDciAndTheCall) {
  auto dev = std::make_unique<FakeDcDevice>(FakeDcDevice::ConnectX6Caps());
  dev->set_fail_create_dci_at(3);
  auto init = DcInitiator::Create(std::move(dev), Small(), [](const TransferOp&) {
    return absl::StatusOr<uint32_t>(kLkey);
  });
  ASSERT_FALSE(init.ok());
  EXPECT_NE(init.status().message().find("DCI 3 of 4"), std::string::npos) << init.status();
  EXPECT_NE(init.status().message().find("mlx5dv_create_qp"), std::string::npos);
}

TEST(DcInitiatorTest, WritePostsOneRdmaWriteAddressedToTheDct) {
  Harness h(FakeDcDevice::ConnectX6Caps(), Small());
  ASSERT_TRUE(h.status.ok());
  TransferOp op = h.Op(Direction::kStoreToClient, 4096, 1000);
  ASSERT_TRUE(h.Submit(op, 1).ok());
  auto posted = h.fake->posted();
  ASSERT_EQ(posted.size(), 1u);
  const DcWr& wr = posted[0].wr;
  EXPECT_EQ(wr.op, DcOpcode::kWrite);
  EXPECT_EQ(wr.remote_addr, op.remote_address);
  EXPECT_EQ(wr.rkey, 0xabcdu);
  EXPECT_EQ(wr.local_addr, reinterpret_cast<uint64_t>(h.store.data() + 4096));
  EXPECT_EQ(wr.lkey, kLkey);
  EXPECT_EQ(wr.length, 1000u);
  EXPECT_EQ(wr.dct_number, 0x1234u);
  EXPECT_EQ(wr.access_key.value(), kSecretKey);
  ASSERT_NE(wr.ah, nullptr);
  EXPECT_EQ(h.fake->cq_reserved(), 1u);
  EXPECT_FALSE(h.Result(1).has_value()) << "done only after the completion";
  ASSERT_TRUE(h.fake->CompleteOldest());
  ASSERT_TRUE(h.Result(1).has_value());
  EXPECT_TRUE(h.Result(1)->ok()) << *h.Result(1);
  EXPECT_EQ(h.fake->cq_reserved(), 0u);
  EXPECT_EQ(h.initiator->pool_detail().outstanding_wrs, 0u);
}

TEST(DcInitiatorTest, ReadPostsRdmaRead) {
  Harness h(FakeDcDevice::ConnectX6Caps(), Small());
  ASSERT_TRUE(h.Submit(h.Op(Direction::kClientToStore, 0, 10), 1).ok());
  ASSERT_EQ(h.fake->posted().size(), 1u);
  EXPECT_EQ(h.fake->posted()[0].wr.op, DcOpcode::kRead);
  h.fake->CompleteAll();
  EXPECT_TRUE(h.Result(1)->ok());
}

TEST(DcInitiatorTest, LargeOpIsChunkedSpreadAndDoneOnceAfterTheLastChunk) {
  DcInitiatorOptions o = Small(8, 16);
  o.max_spread = 4;
  Harness h(FakeDcDevice::ConnectX6Caps(), o);
  const uint64_t len = 3 * (1 << 20) + 12345;  // 4 chunks, the last one short
  TransferOp op = h.Op(Direction::kStoreToClient, 100, len);
  ASSERT_TRUE(h.Submit(op, 1).ok());
  auto posted = h.fake->posted();
  ASSERT_EQ(posted.size(), 4u);
  std::set<uint32_t> dcis;
  uint64_t covered = 0;
  std::vector<std::pair<uint64_t, uint32_t>> ranges;
  for (const PostedWr& p : posted) {
    dcis.insert(p.dci);
    ranges.push_back({p.wr.remote_addr - op.remote_address, p.wr.length});
    EXPECT_EQ(p.wr.local_addr - reinterpret_cast<uint64_t>(op.local),
              p.wr.remote_addr - op.remote_address);
    covered += p.wr.length;
  }
  EXPECT_EQ(covered, len);
  EXPECT_EQ(dcis.size(), 4u) << "4 chunks over 4 DCIs";
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    EXPECT_EQ(ranges[i].first, ranges[i - 1].first + ranges[i - 1].second) << "no gap/overlap";
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(h.fake->CompleteOldest());
    EXPECT_FALSE(h.Result(1).has_value());
  }
  ASSERT_TRUE(h.fake->CompleteOldest());
  ASSERT_TRUE(h.Result(1).has_value());
  EXPECT_TRUE(h.Result(1)->ok());
}

TEST(DcInitiatorTest, SameDestinationStaysOnItsDciWhileInFlight) {
  Harness h(FakeDcDevice::ConnectX6Caps(), Small(4, 8));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64), i).ok());
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64, 0x999, 2), 100).ok());
  auto posted = h.fake->posted();
  for (int i = 1; i < 5; ++i) EXPECT_EQ(posted[i].dci, posted[0].dci);
  EXPECT_NE(posted[5].dci, posted[0].dci) << "another destination goes to a less loaded DCI";
  h.fake->CompleteAll();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(h.Result(i)->ok());
}

// The pool's figures in the terms every transport uses (GetStats, STATUS, client counts).
TEST(DcInitiatorTest, StatsCountReadyDcisBusyDestinationsAndOpsInFlight) {
  Harness h(FakeDcDevice::ConnectX6Caps(), Small(4, 8));
  InitiatorStats st = h.initiator->stats();
  EXPECT_EQ(st.in_use, 4u);
  EXPECT_EQ(st.capacity, 4u);
  EXPECT_EQ(st.clients, 0u);
  EXPECT_EQ(st.in_flight, 0u);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64), i).ok());
  ASSERT_TRUE(h.Submit(h.Op(Direction::kClientToStore, 0, 64, 0x999, 2), 100).ok());
  st = h.initiator->stats();
  EXPECT_EQ(st.clients, 2u) << "two destinations have work in flight";
  EXPECT_EQ(st.in_flight, 4u);
  h.fake->CompleteAll();
  st = h.initiator->stats();
  EXPECT_EQ(st.clients, 0u);
  EXPECT_EQ(st.in_flight, 0u);
  EXPECT_EQ(st.errors, 0u);
  EXPECT_EQ(h.initiator->kind(), TransportKind::kDc);
  EXPECT_THAT(h.initiator->Describe(), ::testing::HasSubstr("4 DCIs on "));
}

TEST(DcInitiatorTest, FullPoolAnswersResourceExhaustedWithoutPosting) {
  DcInitiatorOptions o = Small(1, 2);
  o.max_op_bytes = 1 << 20;
  Harness h(FakeDcDevice::ConnectX6Caps(), o);
  ASSERT_TRUE(h.status.ok()) << h.status;
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 8), 1).ok());
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 8), 2).ok());
  absl::Status s = h.Submit(h.Op(Direction::kStoreToClient, 0, 8), 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(h.fake->posted().size(), 2u);
  h.fake->CompleteAll();
  EXPECT_FALSE(h.Result(3).has_value()) << "a refused op's done never runs";
  EXPECT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 8), 4).ok());
}

TEST(DcInitiatorTest, PostFailureRefusesTheOpAndReturnsItsSlots) {
  Harness h(FakeDcDevice::ConnectX6Caps(), Small(1, 4));
  h.fake->set_fail_next_posts(1);
  absl::Status s = h.Submit(h.Op(Direction::kStoreToClient, 0, 8), 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("ibv_wr_complete"), std::string::npos);
  EXPECT_EQ(h.initiator->pool_detail().outstanding_wrs, 0u);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 8), 10 + i).ok());
}

TEST(DcInitiatorTest, UnregisteredLocalMemoryIsRefused) {
  Harness h(FakeDcDevice::ConnectX6Caps(), Small());
  TransferOp op = h.Op(Direction::kStoreToClient, 0, 8);
  std::byte other[8];
  op.local = other;
  EXPECT_EQ(h.Submit(op, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(h.fake->posted().empty());
}

TEST(DcInitiatorTest, AddressHandleFailureIsUnavailableAndNamesTheDestination) {
  Harness h(FakeDcDevice::ConnectX6Caps(), Small());
  h.fake->set_fail_create_ah(true);
  absl::Status s = h.Submit(h.Op(Direction::kStoreToClient, 0, 8), 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("DCT 0x001234"), std::string::npos) << s;
}

// The heart of recovery: op A's bad rkey puts the DCI in error; op B, sharing the DCI, is
// flushed, re-posted elsewhere and succeeds; the DCI is reset once drained and rejoins.
TEST(DcInitiatorTest, RemoteAccessErrorFailsOnlyItsOpAndTheDciIsRecovered) {
  Harness h(FakeDcDevice::ConnectX6Caps(), Small(2, 8));
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64), 1).ok());  // A
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 64, 64), 2).ok());  // B, same dest
  auto posted = h.fake->posted();
  ASSERT_EQ(posted.size(), 2u);
  const uint32_t dci = posted[0].dci;
  ASSERT_EQ(posted[1].dci, dci);
  h.fake->Complete(posted[0].seq, IBV_WC_REM_ACCESS_ERR, 0x88);
  ASSERT_TRUE(h.Result(1).has_value());
  EXPECT_EQ(h.Result(1)->code(), absl::StatusCode::kPermissionDenied) << *h.Result(1);
  EXPECT_NE(h.Result(1)->message().find("IBV_WC_REM_ACCESS_ERR"), std::string::npos);
  EXPECT_EQ(h.fake->recoveries(dci), 1) << "reset once its flushes drained";
  EXPECT_FALSE(h.fake->in_error(dci));
  // B was re-posted on a ready DCI and has not failed.
  EXPECT_FALSE(h.Result(2).has_value());
  auto out = h.fake->outstanding();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].wr.remote_addr, posted[1].wr.remote_addr);
  h.fake->CompleteAll();
  ASSERT_TRUE(h.Result(2).has_value());
  EXPECT_TRUE(h.Result(2)->ok()) << *h.Result(2);
  const InitiatorStats st = h.initiator->stats();
  EXPECT_EQ(st.in_use, 2u);
  EXPECT_EQ(st.capacity, 2u);
  EXPECT_EQ(st.errors, 1u) << "one error completion; the flush behind it is not an error";
  EXPECT_EQ(st.recoveries, 1u);
  const DcInitiator::PoolDetail pd = h.initiator->pool_detail();
  EXPECT_EQ(pd.dci_recoveries, 1u);
  EXPECT_EQ(pd.reposted_wrs, 1u);
  EXPECT_EQ(h.fake->cq_reserved(), 0u);
  // And the recovered DCI serves again.
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 8, 0x50 + i), 10 + i).ok());
  EXPECT_GT(h.fake->outstanding_on(dci), 0u);
  h.fake->CompleteAll();
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(h.Result(10 + i)->ok());
}

TEST(DcInitiatorTest, CompletionErrorsMapToActionableCodes) {
  struct Case {
    ibv_wc_status wc;
    absl::StatusCode code;
  } cases[] = {
      {IBV_WC_REM_ACCESS_ERR, absl::StatusCode::kPermissionDenied},
      {IBV_WC_REM_OP_ERR, absl::StatusCode::kDataLoss},
      {IBV_WC_RETRY_EXC_ERR, absl::StatusCode::kUnavailable},
      {IBV_WC_GENERAL_ERR, absl::StatusCode::kDataLoss},
  };
  for (const Case& c : cases) {
    Harness h(FakeDcDevice::ConnectX6Caps(), Small(2, 8));
    ASSERT_TRUE(h.Submit(h.Op(Direction::kClientToStore, 0, 64), 1).ok());
    h.fake->Complete(h.fake->posted()[0].seq, c.wc);
    ASSERT_TRUE(h.Result(1).has_value());
    EXPECT_EQ(h.Result(1)->code(), c.code) << *h.Result(1);
    EXPECT_NE(h.Result(1)->message().find("RDMA READ"), std::string::npos) << *h.Result(1);
    EXPECT_NE(h.Result(1)->message().find("DCT 0x001234"), std::string::npos);
  }
}

TEST(DcInitiatorTest, RetryExceededDropsTheCachedAddressHandle) {
  Harness h(FakeDcDevice::ConnectX6Caps(), Small(2, 8));
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64), 1).ok());
  h.fake->Complete(h.fake->posted()[0].seq, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(h.initiator->ah_cache().size(), 0u);
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64), 2).ok());
  EXPECT_EQ(h.fake->ah_creates(), 2) << "the route is resolved again";
}

TEST(DcInitiatorTest, StreamErrorFlushesOnlyThatStreamAndResetsIt) {
  DcCaps caps = FakeDcDevice::ConnectX6Caps();
  caps.max_log_num_concurent = 2;
  caps.max_log_num_errored = 1;
  DcInitiatorOptions o = Small(1, 16);
  Harness h(caps, o);
  ASSERT_TRUE(h.status.ok()) << h.status;
  h.fake->set_errored_streams_to_fail(2);
  // Two destinations on the single DCI: different streams.
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64, 0x10), 1).ok());
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64, 0x10), 2).ok());
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64, 0x20), 3).ok());
  auto posted = h.fake->posted();
  ASSERT_EQ(posted.size(), 3u);
  ASSERT_NE(posted[0].wr.stream, posted[2].wr.stream);
  h.fake->Complete(posted[0].seq, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(h.Result(1)->code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(h.fake->recoveries(0), 0) << "the DCI itself stayed in RTS";
  EXPECT_EQ(h.fake->stream_resets(0), 1);
  // Op 3 on the other stream was never flushed; op 2 was flushed and re-posted.
  h.fake->CompleteAll();
  EXPECT_TRUE(h.Result(2)->ok()) << *h.Result(2);
  EXPECT_TRUE(h.Result(3)->ok()) << *h.Result(3);
  EXPECT_EQ(h.initiator->pool_detail().stream_resets, 1u);
  EXPECT_EQ(h.initiator->pool_detail().dci_recoveries, 0u);
}

TEST(DcInitiatorTest, TooManyErroredStreamsRecoverTheWholeDci) {
  DcCaps caps = FakeDcDevice::ConnectX6Caps();
  caps.max_log_num_concurent = 1;
  caps.max_log_num_errored = 0;
  Harness h(caps, Small(1, 16));
  h.fake->set_errored_streams_to_fail(1);  // the first errored stream moves the DCI to ERR
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64, 0x10), 1).ok());
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64, 0x20), 2).ok());
  auto posted = h.fake->posted();
  h.fake->Complete(posted[0].seq, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(h.fake->recoveries(0), 1);
  h.fake->CompleteAll();
  EXPECT_TRUE(h.Result(2)->ok()) << *h.Result(2);
}

TEST(DcInitiatorTest, ADciThatCannotBeRecoveredLeavesThePoolAndOthersCarryOn) {
  Harness h(FakeDcDevice::ConnectX6Caps(), Small(2, 8));
  h.fake->set_fail_recover(true);
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64), 1).ok());
  const uint32_t bad = h.fake->posted()[0].dci;
  h.fake->Complete(h.fake->posted()[0].seq, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(h.initiator->pool_detail().failed_dcis, 1u);
  EXPECT_EQ(h.initiator->stats().in_use, 1u);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64, 0x100 + i), 10 + i).ok());
  }
  for (const PostedWr& p : h.fake->outstanding()) EXPECT_NE(p.dci, bad);
  h.fake->CompleteAll();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(h.Result(10 + i)->ok());
}

TEST(DcInitiatorTest, AChunkFlushedTooOftenFailsItsOp) {
  DcInitiatorOptions o = Small(1, 8);
  o.max_attempts = 2;
  Harness h(FakeDcDevice::ConnectX6Caps(), o);
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64, 0x1), 1).ok());  // victim
  for (int round = 0; round < 2; ++round) {
    // A bad op to another destination lands on the same (only) DCI and errors it.
    ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64, 0x2), 100 + round).ok());
    auto out = h.fake->outstanding();
    uint64_t bad_seq = 0;
    for (const PostedWr& p : out) {
      if (p.wr.dct_number == 0x2) bad_seq = p.seq;
    }
    // The victim must sit in front of the bad WR so that the error flushes it: complete the
    // bad one directly (the fake flushes everything else on the DCI).
    h.fake->Complete(bad_seq, IBV_WC_REM_ACCESS_ERR);
  }
  ASSERT_TRUE(h.Result(1).has_value());
  EXPECT_EQ(h.Result(1)->code(), absl::StatusCode::kUnavailable) << *h.Result(1);
  EXPECT_NE(h.Result(1)->message().find("IBV_WC_WR_FLUSH_ERR"), std::string::npos);
}

TEST(DcInitiatorTest, ShutdownCancelsWhatIsInFlightAndRefusesNewOps) {
  Harness h(FakeDcDevice::ConnectX6Caps(), Small(2, 8));
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64), 1).ok());
  ASSERT_TRUE(h.Submit(h.Op(Direction::kClientToStore, 0, 3 << 20), 2).ok());
  h.initiator->Shutdown();
  ASSERT_TRUE(h.Result(1).has_value());
  ASSERT_TRUE(h.Result(2).has_value());
  EXPECT_EQ(h.Result(1)->code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(h.Result(2)->code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(h.Submit(h.Op(Direction::kStoreToClient, 0, 64), 3).code(),
            absl::StatusCode::kCancelled);
  h.initiator->Shutdown();  // idempotent
  EXPECT_EQ(h.fake->cq_reserved(), 0u);
}

TEST(DcInitiatorTest, TheDcAccessKeyNeverReachesALogLineOrAnError) {
  SetLogLevel(LogLevel::kDebug);
  Harness h(FakeDcDevice::ConnectX6Caps(), Small(2, 8));
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(h.Submit(h.Op(Direction::kStoreToClient, 0, 64), 1).ok());
  h.fake->Complete(h.fake->posted()[0].seq, IBV_WC_REM_ACCESS_ERR);
  const std::string err = ::testing::internal::GetCapturedStderr();
  SetLogLevel(LogLevel::kInfo);
  EXPECT_NE(err.find("IBV_WC_REM_ACCESS_ERR"), std::string::npos) << "the error was logged";
  const std::string msg(h.Result(1)->message());
  for (const std::string& form :
       {absl::StrCat(kSecretKey), absl::StrCat(absl::Hex(kSecretKey)),
        absl::StrCat(absl::Hex(kSecretKey, absl::kZeroPad16))}) {
    EXPECT_EQ(err.find(form), std::string::npos) << "key leaked into the log: " << err;
    EXPECT_EQ(msg.find(form), std::string::npos) << "key leaked into the status: " << msg;
  }
  std::ostringstream os;
  os << DcAccessKey(kSecretKey);
  EXPECT_EQ(os.str(), "<dc key redacted>");
}

// Many submitters and a completer racing, with errors sprinkled in: every accepted op finishes
// exactly once, and every slot comes back.
TEST(DcInitiatorTest, ConcurrentSubmittersAndCompletionsWithErrorsSettleEverything) {
  DcCaps caps = FakeDcDevice::ConnectX6Caps();
  caps.max_log_num_concurent = 2;
  caps.max_log_num_errored = 1;
  Harness h(caps, Small(4, 32));
  h.fake->set_errored_streams_to_fail(2);
  std::atomic<int> accepted{0};
  std::atomic<bool> stop{false};
  std::thread completer([&] {
    std::mt19937 rng(7);
    while (!stop.load()) {
      const ibv_wc_status st = (rng() % 17 == 0) ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS;
      if (!h.fake->CompleteOldest(st)) std::this_thread::yield();
    }
  });
  std::vector<std::thread> submitters;
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 500; ++i) {
        const int id = t * 10000 + i;
        const uint64_t len = 1 + rng() % (3 << 20);
        absl::Status s = h.Submit(
            h.Op(rng() % 2 ? Direction::kStoreToClient : Direction::kClientToStore, 0, len,
                 0x100 + rng() % 6, static_cast<uint8_t>(rng() % 3)),
            id);
        if (s.ok()) {
          ++accepted;
        } else {
          EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
        }
      }
    });
  }
  for (auto& t : submitters) t.join();
  // Drain what is left.
  for (;;) {
    {
      absl::MutexLock lock(&h.mu);
      if (static_cast<int>(h.results.size()) == accepted.load()) break;
    }
    std::this_thread::yield();
  }
  stop = true;
  completer.join();
  EXPECT_GT(accepted.load(), 0);
  int ok = 0;
  for (auto& [id, s] : h.results) ok += s.ok();
  EXPECT_GT(ok, 0);
  EXPECT_EQ(h.initiator->pool_detail().outstanding_wrs, 0u);
  const InitiatorStats st = h.initiator->stats();
  EXPECT_EQ(st.in_flight, 0u);
  EXPECT_EQ(st.clients, 0u) << "no destination keeps state once its work is done";
  EXPECT_EQ(h.fake->cq_reserved(), 0u);
}

}  // namespace
}  // namespace gdr::dc
