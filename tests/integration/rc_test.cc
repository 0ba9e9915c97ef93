// The rc transport end to end against real verbs (SoftRoCE rxe0 in the test guest): a real
// gdrstored process with an RDMA device, libgdrclient and gdrctl with --transport rc. Verified
// data both ways at sizes 1 B .. 16 MiB, unaligned; concurrent clients with their own QPs; a
// remote access error reported by name and the QP recovered; a killed client's QPs destroyed;
// memory the caller owns registered in place; a daemon asked for a device that does not exist
// refusing to start. Without a verbs device every test skips, saying so.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/src/daemon_rpc.h"
#include "client/src/transport/rc/rc_session.h"
#include "common/base/pattern.h"
#include "common/verbs/verbs_device.h"
#include "gdrstore/client.h"
#include "tests/integration/admin_rpc.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"
#include "tests/integration/read_only_pages.h"
#include "tests/integration/verified_ops.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kVolumeSize = 128 * kMiB;
constexpr uint64_t kMaxOp = 16 * kMiB;
constexpr size_t kSlack = 8192;

std::string DeviceName() {
  auto names = verbs::ListDeviceNames();
  return names.empty() ? "" : names.front();
}

#define SKIP_WITHOUT_DEVICE() \
  if (DeviceName().empty()) GTEST_SKIP() << "no verbs device";

std::unique_ptr<gdrstore::Client> RcClient(const DaemonProcess& d, uint32_t qps = 2) {
  gdrstore::ClientOptions o;
  o.daemon_address = d.address();
  o.transport = gdrstore::Transport::kRc;
  o.rdma_device = DeviceName();
  o.rc_qps = qps;
  auto c = gdrstore::Client::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

absl::StatusOr<gdrstore::v1::RdmaInfo> Rdma(gdrstore::Client& c) {
  auto info = c.GetInfo();
  if (!info.ok()) return info.status();
  if (!info->has_rdma()) return absl::NotFoundError("GetInfo has no rdma section");
  return info->rdma();
}

class RcTest : public ::testing::Test {
 protected:
  void StartDaemon(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--rdma-device", DeviceName(), "--volume",
                                     absl::StrCat("vol0=", kVolumeSize)};
    args.insert(args.end(), extra.begin(), extra.end());
    auto d = DaemonProcess::Start(args, absl::Seconds(120));
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }
  void TearDown() override {
    if (daemon_) {
      auto st = daemon_->Terminate(absl::Seconds(60));
      ASSERT_TRUE(st.ok()) << st.status();
      EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << daemon_->Stderr();
    }
  }
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(RcTest, TwoHundredVerifiedOpsOneByteTo16MiBUnaligned) {
  SKIP_WITHOUT_DEVICE();
  StartDaemon({"--volume", "ctl=32MiB"});  // gdrctl's: holds the initial fill it verifies
  auto client = RcClient(*daemon_);
  ASSERT_NE(client, nullptr);
  auto info = Rdma(*client);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->device(), DeviceName());
  EXPECT_EQ(info->port_state(), "ACTIVE");
  EXPECT_GT(info->mtu(), 0u);
  // Relaxed ordering was asked for and the guest's kernel accepted it; the verified ops below
  // then run over memory regions that carry it.
  EXPECT_TRUE(absl::StartsWith(info->relaxed_ordering(), "on")) << info->relaxed_ordering();
  auto buf = client->AllocateBuffer(kMaxOp + kSlack);
  ASSERT_TRUE(buf.ok()) << buf.status();
  std::mt19937_64 rng(0x7c0ffee);
  std::uniform_real_distribution<double> log_size(0.0, std::log(double(kMaxOp) + 1.0));
  SaltMap salts(kVolumeSize);
  int reads = 0, writes = 0;
  for (int i = 0; i < 200; ++i) {
    uint64_t len = i < 2 ? 1 : i < 4 ? kMaxOp
                                     : std::clamp<uint64_t>(uint64_t(std::exp(log_size(rng))), 1, kMaxOp);
    const uint64_t offset = rng() % (kVolumeSize - len + 1);
    const size_t boff = kGuardBytes + rng() % 4093;
    const gdrstore::Extent e{"vol0", offset, len};
    SCOPED_TRACE(absl::StrCat("op ", i, ": ", len, " bytes at ", offset, ", buffer +", boff));
    absl::Status s = i % 2 == 0 ? VerifiedWrite(*client, **buf, boff, e, salts)
                                : VerifiedRead(*client, **buf, boff, boff, e, 1 + rng() % 1000, &salts);
    ASSERT_TRUE(s.ok()) << s;
    (i % 2 == 0 ? writes : reads)++;
  }
  EXPECT_EQ(writes, 100);
  EXPECT_EQ(reads, 100);

  // gdrctl over rc: its own process, device and connection.
  auto dir = TempDir::Create("gdrctl-rc");
  ASSERT_TRUE(dir.ok());
  int run = 0;
  for (const auto& [cmd, size, off, boff] :
       std::vector<std::tuple<std::string, std::string, std::string, std::string>>{
           {"write", "1", "77", "3"}, {"read", "1", "91", "1"},
           {"write", "16MiB", "4097", "5"}, {"read", "16MiB", "12345", "7"},
           {"write", "1234567", "99999", "0"}}) {
    // `read --verify` stores salt-0 pattern back, so later writes of the initial fill still verify.
    auto r = RunProcess({GDR_GDRCTL_BIN, "--daemon", daemon_->address(), "--transport", "rc",
                         "--rdma-device", DeviceName(), cmd, "--volume", "ctl", "-s", size, "-o", off,
                         "--buffer-offset", boff, "--verify"},
                        (*dir)->path(), absl::StrCat("gdrctl", run++), absl::Seconds(120));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_code, 0) << r->Describe();
    EXPECT_TRUE(absl::StrContains(r->out, "verified")) << r->out;
  }
  auto shown = RunProcess({GDR_GDRCTL_BIN, "--daemon", daemon_->address(), "--transport", "rc",
                           "info"},
                          (*dir)->path(), "info", absl::Seconds(60));
  ASSERT_TRUE(shown.ok());
  EXPECT_EQ(shown->exit_code, 0) << shown->Describe();
  for (const char* want : {"rdma (daemon):", "rdma (this client):", "GID index", "MTU", "ACTIVE"}) {
    EXPECT_TRUE(absl::StrContains(shown->out, want)) << want << " missing in\n" << shown->out;
  }
}

TEST_F(RcTest, FourConcurrentClientsEachWithTheirOwnQps) {
  SKIP_WITHOUT_DEVICE();
  StartDaemon({"--rc-max-qps-per-client", "2"});
  constexpr int kClients = 4;
  std::vector<std::unique_ptr<gdrstore::Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(RcClient(*daemon_, 3));  // asks for 3, the daemon grants 2
    ASSERT_NE(clients.back(), nullptr);
  }
  std::set<uint64_t> ids;
  for (auto& c : clients) {
    auto mine = c->transport_info().rdma;
    ASSERT_TRUE(mine.has_value());
    EXPECT_EQ(mine->qps, 2u);
    ids.insert(mine->connection_id);
  }
  EXPECT_EQ(ids.size(), size_t{kClients}) << "each client has its own connection";
  auto info = Rdma(*clients[0]);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->rc_connections(), uint32_t{kClients});
  EXPECT_EQ(info->rc_qps(), uint32_t{2 * kClients});

  const uint64_t region = kVolumeSize / kClients;
  std::vector<absl::Status> results(kClients);
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([&, t] {
      gdrstore::Client& c = *clients[t];
      auto buf = c.AllocateBuffer(2 * kMiB + kSlack);
      if (!buf.ok()) {
        results[t] = buf.status();
        return;
      }
      SaltMap salts(kVolumeSize);
      std::mt19937_64 rng(100 + t);
      for (int i = 0; i < 24 && results[t].ok(); ++i) {
        const uint64_t len = 1 + rng() % (2 * kMiB);
        const gdrstore::Extent e{"vol0", t * region + rng() % (region - len), len};
        const size_t boff = kGuardBytes + rng() % 4000;
        results[t] = i % 2 ? VerifiedRead(c, **buf, boff, boff, e, 1 + t * 1000 + i, &salts)
                           : VerifiedWrite(c, **buf, boff, e, salts);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kClients; ++t) EXPECT_TRUE(results[t].ok()) << "client " << t << ": " << results[t];
  clients.clear();
  auto probe = RcClient(*daemon_, 1);
  ASSERT_NE(probe, nullptr);
  EXPECT_TRUE(PollUntil(
      [&] {
        auto i = Rdma(*probe);
        return i.ok() && i->rc_qps() == 1 && i->rc_connections() == 1;
      },
      absl::Seconds(60)))
      << "closed clients' QPs were not released";
}

TEST_F(RcTest, RemoteAccessErrorsAreNamedAndTheQpRecovers) {
  SKIP_WITHOUT_DEVICE();
  StartDaemon();
  auto a = RcClient(*daemon_, 1);  // one QP: the next op must use the recovered QP
  auto b = RcClient(*daemon_, 1);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto abuf = a->AllocateBuffer(kMiB);
  auto bbuf = b->AllocateBuffer(kMiB);
  ASSERT_TRUE(abuf.ok() && bbuf.ok());
  SaltMap salts(kVolumeSize);
  ASSERT_TRUE(VerifiedWrite(*b, **bbuf, kGuardBytes, {"vol0", 5000, 70000}, salts).ok());

  auto bad_op = [&](uint64_t address, uint32_t rkey, uint64_t len) {
    auto rb = a->Describe(**abuf, 0, len);
    EXPECT_TRUE(rb.ok());
    gdrstore::v1::WriteRequest req;
    req.mutable_extent()->set_volume("vol0");
    req.mutable_extent()->set_offset(4096);
    req.mutable_extent()->set_length(len);
    *req.mutable_buffer() = *rb;
    req.mutable_buffer()->set_address(address);
    req.mutable_buffer()->set_rkey(rkey);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    gdrstore::v1::OpResponse resp;
    return gdr::DaemonStub(*a)->Write(&ctx, req, &resp);
  };
  // Wrong rkey, then an address range running past the end of the registered region.
  const grpc::Status wrong_key = bad_op((*abuf)->address(), (*abuf)->rkey() ^ 0x00ff0000u, 4096);
  EXPECT_EQ(wrong_key.error_code(), grpc::StatusCode::PERMISSION_DENIED) << wrong_key.error_message();
  EXPECT_TRUE(absl::StrContains(wrong_key.error_message(), "IBV_WC_REM_ACCESS_ERR"))
      << wrong_key.error_message();
  EXPECT_TRUE(absl::StrContains(wrong_key.error_message(), "rkey")) << wrong_key.error_message();

  ASSERT_TRUE(VerifiedWrite(*a, **abuf, kGuardBytes, {"vol0", 123457, 300000}, salts).ok())
      << "the same client's next valid op, on its recovered QP";
  ASSERT_TRUE(VerifiedWrite(*b, **bbuf, kGuardBytes, {"vol0", 7, 65537}, salts).ok())
      << "another client is unaffected";

  const grpc::Status outside =
      bad_op((*abuf)->address() + (*abuf)->size() - 100, (*abuf)->rkey(), 8192);
  EXPECT_EQ(outside.error_code(), grpc::StatusCode::PERMISSION_DENIED) << outside.error_message();
  EXPECT_TRUE(absl::StrContains(outside.error_message(), "IBV_WC_REM_ACCESS_ERR"))
      << outside.error_message();
  ASSERT_TRUE(VerifiedRead(*a, **abuf, kGuardBytes, kGuardBytes, {"vol0", 999, 500001}, 42, &salts).ok());
  ASSERT_TRUE(VerifiedRead(*b, **bbuf, kGuardBytes, kGuardBytes, {"vol0", 600000, 4097}, 43, &salts).ok());
  auto mine = a->transport_info().rdma;
  ASSERT_TRUE(mine.has_value());
  EXPECT_EQ(mine->qp_resets, 2u) << "one QP reset per remote access error";
  EXPECT_EQ(b->transport_info().rdma->qp_resets, 0u);
  EXPECT_TRUE(absl::StrContains(daemon_->Stderr(), "recovered")) << daemon_->Stderr();
  // Each failed QP gave way to a new one (a new number), never reset in place: a reset QP keeps
  // its number and would take stale packets of the failed pair.
  const std::regex replaced(R"(QP (\d+) replaced by QP (\d+) after)");
  const std::string log = daemon_->Stderr();
  int replacements = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), replaced);
       it != std::sregex_iterator(); ++it, ++replacements) {
    EXPECT_NE((*it)[1].str(), (*it)[2].str()) << it->str();
  }
  EXPECT_EQ(replacements, 2) << log;
}

// An injected qp-error (gdrstore.v1.Admin) moves the QP carrying an op to the error state after
// the op is posted, as a real QP failure would: no op is lost (flushed work requests run again),
// the QP is reset and the client reconnects it, and the counts say so.
TEST_F(RcTest, AnInjectedQpErrorLosesNoOpAndTheQpRecovers) {
  SKIP_WITHOUT_DEVICE();
  StartDaemon();
  auto c = RcClient(*daemon_, 2);
  ASSERT_NE(c, nullptr);
  auto buf = c->AllocateBuffer(8 * kMiB + 2 * kGuardBytes);
  ASSERT_TRUE(buf.ok());
  SaltMap salts(kVolumeSize);
  auto set = SetFault(daemon_->address(), "kind=qp-error,volume=vol0,ops=put,count=1");
  ASSERT_TRUE(set.ok()) << set.status();
  for (uint64_t i = 0; i < 6; ++i) {
    const gdrstore::Extent e{"vol0", i * 9 * kMiB + 11, 8 * kMiB};
    ASSERT_TRUE(VerifiedRead(*c, **buf, kGuardBytes, kGuardBytes, e, i + 1, &salts).ok()) << i;
    ASSERT_TRUE(VerifiedWrite(*c, **buf, kGuardBytes, e, salts).ok()) << i;
  }
  gdrstore::v1::PoolStats pool;
  EXPECT_TRUE(PollUntil(
      [&] {
        auto stats = GetStats(*c);
        if (!stats.ok()) return false;
        for (const auto& t : stats->transports()) {
          if (t.transport() == gdrstore::v1::TRANSPORT_RC) pool = t.pool();
        }
        return pool.errors() >= 1 && pool.errors() == pool.recoveries();
      },
      absl::Seconds(60)))
      << "rc QP errors " << pool.errors() << ", recovered " << pool.recoveries();
  auto list = ListFaults(daemon_->address());
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->faults(0).hits(), 1u);
  EXPECT_GE(c->transport_info().rdma->qp_resets, 1u);
  EXPECT_TRUE(absl::StrContains(daemon_->Stderr(), "moved to the error state by an injected fault"))
      << daemon_->Stderr();
}

// Memory the caller owns, registered in place with the NIC (an MR on the caller's heap): gets
// and puts land in it, the same range registered again is the same MR, and a read-only
// mapping is registered remote-read only, so a get into it is refused by the NIC itself.
TEST_F(RcTest, CallerMemoryIsRegisteredInPlace) {
  SKIP_WITHOUT_DEVICE();
  StartDaemon();
  auto client = RcClient(*daemon_);
  ASSERT_NE(client, nullptr);
  std::vector<std::byte> mine(2 * kMiB + 5);
  std::byte* p = mine.data() + 5;
  const size_t n = 2 * kMiB;
  auto buf = client->RegisterHostMemory(p, n);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto again = client->RegisterHostMemory(p, n);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->rkey(), (*buf)->rkey());
  ASSERT_TRUE(client->Write({"vol0", 777, n}, **buf).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), 777, std::span(p, n)), std::nullopt);
  PatternFill(PatternSeed("vol0", 3), 0, std::span(p, n));
  ASSERT_TRUE(client->Read({"vol0", 8 * kMiB, n}, **again).ok());
  std::vector<std::byte> back(n);
  auto back_buf = client->RegisterHostMemory(back.data(), n);
  ASSERT_TRUE(back_buf.ok()) << back_buf.status();
  ASSERT_TRUE(client->Write({"vol0", 8 * kMiB, n}, **back_buf).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0", 3), 0, std::span(back.data(), n)), std::nullopt);

  ReadOnlyPages ro(4, [](std::span<std::byte> s) { std::ranges::fill(s, std::byte{0x5a}); });
  ASSERT_TRUE(ro.ok());
  auto rob = client->RegisterHostMemory(ro.data(), ro.size());
  ASSERT_TRUE(rob.ok()) << rob.status();
  EXPECT_FALSE((*rob)->writable());
  EXPECT_TRUE(client->Read({"vol0", 0, ro.size()}, **rob).ok());
  EXPECT_EQ(client->Write({"vol0", 0, ro.size()}, **rob).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(RcTest, VolumesMadeAtRunTimeAndReadOnlyFilesAreRegisteredWithTheRail) {
  SKIP_WITHOUT_DEVICE();
  // A read-only --volume-dir file (registered without local write) and a volume made while
  // serving (registered by the store's hook before any op can name it), both over rc.
  auto dir = TempDir::Create("gdr-rc-voldir");
  ASSERT_TRUE(dir.ok());
  std::string bytes(kMiB + 3, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + 1);
  std::ofstream((*dir)->File("weights.bin"), std::ios::binary) << bytes;
  StartDaemon({"--volume-dir", (*dir)->path()});
  ASSERT_NE(daemon_, nullptr);
  auto client = RcClient(*daemon_);
  ASSERT_NE(client, nullptr);
  auto buf = client->AllocateBuffer(2 * kMiB);
  ASSERT_TRUE(buf.ok()) << buf.status();
  ASSERT_TRUE(client->Write({"weights.bin", 0, bytes.size()}, **buf).ok());
  EXPECT_EQ(std::memcmp((*buf)->data(), bytes.data(), bytes.size()), 0);
  EXPECT_EQ(client->Read({"weights.bin", 0, 4096}, **buf).status().code(),
            absl::StatusCode::kFailedPrecondition);

  gdrstore::v1::CreateVolumeRequest r;
  r.set_name("made/now");
  r.set_size(4 * kMiB);
  ASSERT_TRUE(CreateVolume(daemon_->address(), r).ok());
  ASSERT_TRUE(client->Write({"made/now", kMiB, 2 * kMiB}, **buf).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("made/now"), kMiB, std::span((*buf)->data(), 2 * kMiB)),
            std::nullopt);
  PatternFill(PatternSeed("made/now", 5), 0, std::span((*buf)->data(), 2 * kMiB));
  ASSERT_TRUE(client->Read({"made/now", 0, 2 * kMiB}, **buf).ok());
  std::memset((*buf)->data(), 0, 2 * kMiB);
  ASSERT_TRUE(client->Write({"made/now", 0, 2 * kMiB}, **buf).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("made/now", 5), 0, std::span((*buf)->data(), 2 * kMiB)),
            std::nullopt);
  ASSERT_TRUE(DeleteVolume(daemon_->address(), "made/now").ok());
  EXPECT_EQ(client->Write({"made/now", 0, 4096}, **buf).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(RcTest, KilledClientsQpsAreDestroyed) {
  SKIP_WITHOUT_DEVICE();
  StartDaemon({"--volume", "bench=64MiB"});  // the killed benches write only there
  auto other = RcClient(*daemon_, 1);
  ASSERT_NE(other, nullptr);
  auto base = Rdma(*other);
  ASSERT_TRUE(base.ok()) << base.status();
  ASSERT_EQ(base->rc_qps(), 1u);
  auto dir = TempDir::Create("gdrctl-rc-kill");
  ASSERT_TRUE(dir.ok());
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    auto bench = ChildProcess::Spawn(
        {GDR_GDRCTL_BIN, "--daemon", daemon_->address(), "--transport", "rc", "--rc-qps", "3",
         "bench", "-t", round ? "read" : "write", "-s", "4MiB", "-n", "1000000", "--qd", "4",
         "--volume", "bench", "-q"},
        (*dir)->File("out"), (*dir)->File("err"));
    ASSERT_TRUE(bench.ok()) << bench.status();
    // Its connection is up and ops are moving (the daemon has ops in flight on its QPs).
    ASSERT_TRUE(PollUntil(
        [&] {
          auto i = Rdma(*other);
          return i.ok() && i->rc_qps() == 4;
        },
        absl::Seconds(60)))
        << ReadFileOrEmpty((*dir)->File("err"));
    auto info = other->GetInfo();
    ASSERT_TRUE(info.ok());
    ASSERT_TRUE((*bench)->Running()) << ReadFileOrEmpty((*dir)->File("err"));
    ASSERT_TRUE((*bench)->Signal(SIGKILL).ok());
    ASSERT_TRUE((*bench)->Wait(absl::Seconds(30)).ok());
    EXPECT_TRUE(PollUntil(
        [&] {
          auto i = Rdma(*other);
          return i.ok() && i->rc_qps() == base->rc_qps() && i->rc_connections() == 1;
        },
        absl::Seconds(90)))
        << "the killed client's QPs are still counted: " << daemon_->Stderr();
    auto buf = other->AllocateBuffer(kMiB);
    ASSERT_TRUE(buf.ok());
    SaltMap salts(kVolumeSize);
    EXPECT_TRUE(VerifiedWrite(*other, **buf, kGuardBytes, {"vol0", 64 * kMiB + 3, 999999}, salts).ok());
  }
}

// The client's QPs answer (READ responses, ACKs) with the traffic class the daemon's requests
// carry: RcAccept hands over --rc-traffic-class and the client's RTR takes it, so on a lossless
// RoCE fabric responses do not fall back to DSCP 0. Checked on the client's QP itself.
TEST_F(RcTest, ClientQpsTakeTheDaemonsTrafficClass) {
  SKIP_WITHOUT_DEVICE();
  StartDaemon({"--rc-traffic-class", "96", "--rc-service-level", "5"});
  auto stub = gdrstore::v1::GdrStore::NewStub(
      grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
  RcSessionOptions o;
  o.device.device = DeviceName();
  o.qps = 1;
  absl::StatusOr<std::shared_ptr<RcSession>> s = RcSession::Open(stub.get(), o);
  ASSERT_TRUE(s.ok()) << s.status();
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp((*s)->qp(0).qp(), &attr, IBV_QP_AV | IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(attr.ah_attr.grh.traffic_class, 96);
  (*s)->Close();
  // And data moves in that class (rxe puts it in the IP header's DSCP/ECN byte).
  auto c = RcClient(*daemon_);
  ASSERT_NE(c, nullptr);
  auto buf = c->AllocateBuffer(64 << 10);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto w = c->Write({"vol0", 4096, 64 << 10}, **buf);
  ASSERT_TRUE(w.ok()) << w.status();
  auto r = c->Read({"vol0", 4096, 64 << 10}, **buf);
  ASSERT_TRUE(r.ok()) << r.status();
}

TEST(RcStartupTest, UnknownDeviceOrAddressExitsNonZeroNamingWhatExists) {
  SKIP_WITHOUT_DEVICE();
  auto dir = TempDir::Create("gdrstored-rc-bad");
  ASSERT_TRUE(dir.ok());
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--rdma-device", "nosuchdev7"}, "nosuchdev7"},
      {{"--rdma-addr", "127.0.0.1"}, "127.0.0.1"},
      {{"--rdma-addr", "203.0.113.77"}, "203.0.113.77"}};
  int n = 0;
  for (const auto& [flags, looked_for] : cases) {
    std::vector<std::string> argv = {GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--volume",
                                     "vol0=1MiB"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto r = RunProcess(argv, (*dir)->path(), absl::StrCat("d", n++), absl::Seconds(60));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_NE(r->exit_code, 0) << r->Describe();
    EXPECT_NE(r->exit_code, -1) << "killed, not exited: " << r->Describe();
    std::vector<std::string> errors;
    for (absl::string_view line : absl::StrSplit(r->err, '\n', absl::SkipEmpty())) {
      if (absl::StartsWith(line, "gdrstored: ")) errors.emplace_back(line);
    }
    ASSERT_EQ(errors.size(), 1u) << r->err;
    EXPECT_TRUE(absl::StrContains(errors[0], looked_for)) << errors[0];
    EXPECT_TRUE(absl::StrContains(errors[0], DeviceName())) << "names what exists: " << errors[0];
  }
}

}  // namespace
}  // namespace gdr::integ
