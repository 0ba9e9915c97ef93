// The local transport's initiator (daemon/transport/local/local_initiator.h) against a real
// handoff server on a Unix socket, a real client handing over real memfds and a real store:
// gets and puts verified against the store's pattern, large ops split over the copy threads,
// every refusal, a client that goes away, GetInfo, stats and shutdown; and the admission rule.
#include "daemon/transport/local/local_initiator.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "common/handoff/handoff_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/test_memfd.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kVolume = 16 << 20;
constexpr size_t kRegion = 8 << 20;

using Memfd = gdr::test::TestMemfd;

class LocalInitiatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gdr-local-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    absl::StatusOr<std::unique_ptr<Store>> s =
        Store::Create({{"vol0", kVolume, {}, {}}, {"vol1", 1 << 20, {}, {}}});
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    LocalOptions o;
    o.socket_path = dir_ + "/local.sock";
    o.copy_threads = 3;
    o.split_bytes = 1 << 20;
    o.max_bytes_per_client = 32 << 20;
    absl::StatusOr<std::unique_ptr<LocalInitiator>> init =
        LocalInitiator::Create(o, store_.get(), "gdrstored test");
    ASSERT_TRUE(init.ok()) << init.status();
    initiator_ = std::move(*init);
    absl::StatusOr<std::unique_ptr<handoff::HandoffClient>> c =
        handoff::HandoffClient::Connect(o.socket_path, "local-initiator-test", absl::Seconds(10));
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    mem_ = std::make_unique<Memfd>(kRegion);
    rkey_ = Register(*mem_, /*writable=*/true);
  }
  void TearDown() override {
    client_.reset();
    initiator_.reset();
    ::rmdir(dir_.c_str());
  }

  uint32_t Register(const Memfd& m, bool writable) {
    handoff::Register r;
    r.kind = handoff::MemoryKind::kHostMemfd;
    r.writable = writable;
    r.address = m.address();
    r.size = m.size;
    absl::StatusOr<uint32_t> rkey = client_->Register(r, m.fd);
    EXPECT_TRUE(rkey.ok()) << rkey.status();
    return rkey.value_or(0);
  }

  TransferOp Op(Direction d, const std::string& volume, uint64_t offset, uint64_t length,
                uint64_t remote, uint32_t rkey) const {
    TransferOp op;
    op.transport = TransportKind::kLocal;
    op.direction = d;
    op.volume = volume;
    op.offset = offset;
    op.store_volume = store_->Find(volume);
    op.local = op.store_volume->data() + offset;
    op.length = length;
    op.remote_address = remote;
    op.rkey = rkey;
    op.destination = std::make_shared<const LocalDestination>(client_->session(), client_->key());
    return op;
  }

  // Submits and waits for the answer; the refusal when Submit refuses.
  absl::Status Run(const TransferOp& op) {
    auto promise = std::make_shared<std::promise<absl::Status>>();
    std::future<absl::Status> answer = promise->get_future();
    absl::Status s = initiator_->Submit(op, [promise](absl::Status st) { promise->set_value(st); });
    if (!s.ok()) return s;
    return answer.get();
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<LocalInitiator> initiator_;
  std::unique_ptr<handoff::HandoffClient> client_;
  std::unique_ptr<Memfd> mem_;
  uint32_t rkey_ = 0;
};

TEST_F(LocalInitiatorTest, GetsAndPutsMoveVerifiedBytes) {
  // A get of 5 MiB + 3 at odd offsets: split over the copy threads.
  const uint64_t length = (5 << 20) + 3, vol_off = 12345, buf_off = 777;
  ASSERT_TRUE(Run(Op(Direction::kStoreToClient, "vol0", vol_off, length,
                     mem_->address() + buf_off, rkey_))
                  .ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), vol_off,
                            std::span<const std::byte>(mem_->data + buf_off, length)),
            std::nullopt);
  // The bytes around it are untouched.
  EXPECT_EQ(mem_->data[buf_off - 1], std::byte{0});
  EXPECT_EQ(mem_->data[buf_off + length], std::byte{0});
  // A put of a salted pattern, read back from the store's memory.
  PatternFill(PatternSeed("vol1", 7), 0, std::span<std::byte>(mem_->data, 1 << 20));
  ASSERT_TRUE(
      Run(Op(Direction::kClientToStore, "vol1", 0, 1 << 20, mem_->address(), rkey_)).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("vol1", 7), 0,
                            std::span<const std::byte>(store_->Find("vol1")->data(), 1 << 20)),
            std::nullopt);
  const InitiatorStats s = initiator_->stats();
  EXPECT_EQ(s.capacity, 3u);
  EXPECT_EQ(s.clients, 1u);
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.errors, 0u);
  EXPECT_TRUE(initiator_->CheckHealth(absl::Seconds(10)).ok());
}

TEST_F(LocalInitiatorTest, ManyConcurrentOpsEachLandWhereTheySay) {
  constexpr int kOps = 64;
  constexpr uint64_t kLen = 100000;
  std::vector<std::future<absl::Status>> answers;
  for (int i = 0; i < kOps; ++i) {
    auto promise = std::make_shared<std::promise<absl::Status>>();
    answers.push_back(promise->get_future());
    const TransferOp op = Op(Direction::kStoreToClient, "vol0", i * 2 * kLen, kLen,
                             mem_->address() + i * kLen, rkey_);
    ASSERT_TRUE(
        initiator_->Submit(op, [promise](absl::Status st) { promise->set_value(st); }).ok());
  }
  for (auto& a : answers) EXPECT_TRUE(a.get().ok());
  for (int i = 0; i < kOps; ++i) {
    EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), i * 2 * kLen,
                              std::span<const std::byte>(mem_->data + i * kLen, kLen)),
              std::nullopt)
        << "op " << i;
  }
}

TEST_F(LocalInitiatorTest, RefusalsNameTheCauseAndNeverTheKey) {
  TransferOp op = Op(Direction::kStoreToClient, "vol0", 0, 4096, mem_->address(), rkey_);
  // A wrong key and an unknown session read the same.
  std::string wrong = client_->key();
  wrong[0] = static_cast<char>(wrong[0] ^ 1);
  op.destination = std::make_shared<const LocalDestination>(client_->session(), wrong);
  absl::Status s = Run(op);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr(wrong)));
  op.destination = std::make_shared<const LocalDestination>(client_->session() + 1,
                                                            client_->key());
  EXPECT_EQ(Run(op).code(), absl::StatusCode::kPermissionDenied);
  // Unknown rkey, a range past the region, a get into a read-only region.
  op = Op(Direction::kStoreToClient, "vol0", 0, 4096, mem_->address(), rkey_ + 1000);
  s = Run(op);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("not registered"));
  op = Op(Direction::kStoreToClient, "vol0", 0, 8192, mem_->address() + kRegion - 4096, rkey_);
  s = Run(op);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("outside region"));
  Memfd ro(1 << 20);
  const uint32_t ro_rkey = Register(ro, /*writable=*/false);
  s = Run(Op(Direction::kStoreToClient, "vol0", 0, 4096, ro.address(), ro_rkey));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("read-only"));
  // ... but a put reads it.
  EXPECT_TRUE(Run(Op(Direction::kClientToStore, "vol1", 0, 4096, ro.address(), ro_rkey)).ok());
  // An op another transport made is not this one's.
  TransferOp tcp = Op(Direction::kStoreToClient, "vol0", 0, 4096, mem_->address(), rkey_);
  tcp.destination.reset();
  EXPECT_EQ(Run(tcp).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(initiator_->stats().in_flight, 0u);
}

TEST_F(LocalInitiatorTest, AClientThatGoesAwayEndsItsSessionAndTheRestGoesOn) {
  const TransferOp op = Op(Direction::kStoreToClient, "vol0", 0, 4 << 20, mem_->address(), rkey_);
  // An op taken before the client goes finishes on memory that stays mapped until it is done.
  auto promise = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> answer = promise->get_future();
  ASSERT_TRUE(initiator_->Submit(op, [promise](absl::Status st) { promise->set_value(st); }).ok());
  client_.reset();
  EXPECT_TRUE(answer.get().ok());
  // Its session is gone from the table once the server has seen the socket close.
  for (int i = 0; i < 500 && initiator_->handoff_stats().sessions != 0; ++i) ::usleep(10000);
  EXPECT_EQ(initiator_->handoff_stats().sessions, 0u);
  EXPECT_EQ(initiator_->handoff_stats().regions, 0u);
  EXPECT_EQ(Run(op).code(), absl::StatusCode::kPermissionDenied);
  // Another client is served as before.
  absl::StatusOr<std::unique_ptr<handoff::HandoffClient>> c = handoff::HandoffClient::Connect(
      dir_ + "/local.sock", "second", absl::Seconds(10));
  ASSERT_TRUE(c.ok()) << c.status();
  client_ = std::move(*c);
  Memfd m(1 << 20);
  const uint32_t rkey = Register(m, true);
  ASSERT_TRUE(Run(Op(Direction::kStoreToClient, "vol0", 999, 1 << 20, m.address(), rkey)).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), 999, std::span<const std::byte>(m.data, 1 << 20)),
            std::nullopt);
}

TEST_F(LocalInitiatorTest, PerClientByteLimitAndUnsealedMemfdsAreRefused) {
  Memfd big(32 << 20);  // 8 MiB are registered already; the limit is 32 MiB
  handoff::Register r;
  r.kind = handoff::MemoryKind::kHostMemfd;
  r.address = big.address();
  r.size = big.size;
  absl::StatusOr<uint32_t> rkey = client_->Register(r, big.fd);
  EXPECT_EQ(rkey.status().code(), absl::StatusCode::kResourceExhausted) << rkey.status();
  Memfd loose(1 << 20, /*seal=*/false);
  r.address = loose.address();
  r.size = loose.size;
  rkey = client_->Register(r, loose.fd);
  EXPECT_EQ(rkey.status().code(), absl::StatusCode::kInvalidArgument) << rkey.status();
  EXPECT_THAT(std::string(rkey.status().message()), HasSubstr("F_SEAL_SHRINK"));
}

TEST_F(LocalInitiatorTest, GpuMemoryWithoutADriverIsRefusedAtRegistration) {
  handoff::Register r;
  r.kind = handoff::MemoryKind::kGpuIpc;
  r.address = 0x7f1200000000;
  r.size = 1 << 20;
  r.allocation_size = 2 << 20;
  r.gpu = "0000:b7:00.0";
  absl::StatusOr<uint32_t> rkey = client_->Register(r, -1);
  if (rkey.ok() || rkey.status().code() != absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << "this host has a GPU driver: " << rkey.status();
  }
  EXPECT_THAT(std::string(rkey.status().message()),
              testing::AnyOf(HasSubstr("libcuda.so.1"), HasSubstr("no GPU support")));
  // The daemon's session survives a refused registration.
  EXPECT_TRUE(Run(Op(Direction::kStoreToClient, "vol0", 0, 4096, mem_->address(), rkey_)).ok());
}

TEST_F(LocalInitiatorTest, InfoDescribeAndShutdown) {
  gdrstore::v1::GetInfoResponse info;
  initiator_->FillInfo(&info);
  EXPECT_EQ(info.local().socket_path(), dir_ + "/local.sock");
  EXPECT_EQ(info.local().host_id().size(), 36u) << info.local().host_id();  // a boot id UUID
  const std::string d = initiator_->Describe();
  EXPECT_THAT(d, HasSubstr("socket " + dir_ + "/local.sock (mode 0600"));
  EXPECT_THAT(d, HasSubstr("3 copy threads, 1 sessions, 1 regions (8 MiB)"));
  initiator_->Shutdown();
  EXPECT_EQ(Run(Op(Direction::kStoreToClient, "vol0", 0, 4096, mem_->address(), rkey_)).code(),
            absl::StatusCode::kCancelled);
  initiator_->Shutdown();  // idempotent
}

TEST(LocalAdmitTest, RootTheDaemonsUidAndTheListsOnly) {
  LocalOptions o;
  const uid_t self = 990;
  EXPECT_TRUE(AdmitLocalPeer(o, self, {.pid = 5, .uid = 0, .gid = 0}).ok());
  EXPECT_TRUE(AdmitLocalPeer(o, self, {.pid = 5, .uid = 990, .gid = 4}).ok());
  absl::Status s = AdmitLocalPeer(o, self, {.pid = 77, .uid = 1000, .gid = 1000});
  ASSERT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()), HasSubstr("uid 1000 (gid 1000, pid 77)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("admitted: uid 0, uid 990 (the daemon's)"));
  EXPECT_EQ(LocalSocketMode(o), 0600u);
  o.allow_uids = {1000};
  o.allow_gids = {44};
  EXPECT_TRUE(AdmitLocalPeer(o, self, {.pid = 77, .uid = 1000, .gid = 1000}).ok());
  EXPECT_TRUE(AdmitLocalPeer(o, self, {.pid = 78, .uid = 1001, .gid = 44}).ok());
  EXPECT_FALSE(AdmitLocalPeer(o, self, {.pid = 79, .uid = 1002, .gid = 45}).ok());
  EXPECT_EQ(LocalSocketMode(o), 0666u);
  o.socket_mode = 0660;
  EXPECT_EQ(LocalSocketMode(o), 0660u);
  LocalOptions any;
  any.allow_any = true;
  EXPECT_TRUE(AdmitLocalPeer(any, self, {.pid = 79, .uid = 1002, .gid = 45}).ok());
}

TEST(LocalInitiatorCreateTest, ASocketPathThatCannotBeBoundIsNamed) {
  absl::StatusOr<std::unique_ptr<Store>> s = Store::Create({{"vol0", 1 << 20, {}, {}}});
  ASSERT_TRUE(s.ok());
  LocalOptions o;
  o.socket_path = "/nonexistent-dir-for-gdr-test/local.sock";
  absl::StatusOr<std::unique_ptr<LocalInitiator>> init =
      LocalInitiator::Create(o, s->get(), "gdrstored test");
  ASSERT_FALSE(init.ok());
  EXPECT_THAT(std::string(init.status().message()), HasSubstr(o.socket_path));
  o.socket_path.clear();
  EXPECT_EQ(LocalInitiator::Create(o, s->get(), "t").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gdr
