// The local transport end to end: a real gdrstored serving its handoff socket (--local-socket)
// and the client library on the same host handing memory over (a memfd for AllocateBuffer's
// memory): verified gets and puts, unary and on a Stream; transport auto picking local; memory
// the caller owns refused naming the way to get shareable memory; a daemon without the socket
// refusing transport local by name while auto falls back to tcp; a client that goes away
// leaving the daemon serving the next.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class LocalClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("gdr-local");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
    socket_ = dir_->File("local.sock");
    auto d = DaemonProcess::Start({"--volume", "vol0=64MiB", "--local-socket", socket_});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }
  void TearDown() override {
    if (daemon_) {
      auto st = daemon_->Terminate(absl::Seconds(30));
      ASSERT_TRUE(st.ok()) << st.status();
      EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << daemon_->Stderr();
    }
  }
  absl::StatusOr<std::unique_ptr<gdrstore::Client>> Connect(gdrstore::Transport t) {
    gdrstore::ClientOptions o;
    o.daemon_address = daemon_->address();
    o.transport = t;
    return gdrstore::Client::Connect(o);
  }
  std::unique_ptr<TempDir> dir_;
  std::string socket_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(LocalClientTest, GetsAndPutsMoveVerifiedBytesThroughTheHandedOverMemory) {
  auto c = Connect(gdrstore::Transport::kLocal);
  ASSERT_TRUE(c.ok()) << c.status();
  const gdrstore::TransportInfo info = (*c)->transport_info();
  EXPECT_EQ(info.kind, gdrstore::Transport::kLocal);
  EXPECT_EQ(info.local_socket, socket_);
  EXPECT_FALSE(info.through_agent);
  EXPECT_TRUE(absl::StrContains(info.description, socket_)) << info.description;

  const size_t n = 8 * kMiB + 123;
  auto buf = (*c)->AllocateBuffer(n);
  ASSERT_TRUE(buf.ok()) << buf.status();
  std::span<std::byte> bytes((*buf)->data(), n);
  // get: store -> memory at an unaligned offset of the volume.
  auto got = (*c)->Write({"vol0", 4097, n}, **buf);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes, n);
  EXPECT_EQ(got->path, "local/host");
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), 4097, bytes), std::nullopt);
  // put: memory -> store, then back into a second buffer.
  PatternFill(PatternSeed("vol0", 9), 0, bytes);
  ASSERT_TRUE((*c)->Read({"vol0", 16 * kMiB, n}, **buf).ok());
  auto back = (*c)->AllocateBuffer(n);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE((*c)->Write({"vol0", 16 * kMiB, n}, **back).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0", 9), 0, std::span((*back)->data(), n)),
            std::nullopt);
}

TEST_F(LocalClientTest, StreamOpsOnSlicesOfOneBufferAllLand) {
  auto c = Connect(gdrstore::Transport::kLocal);
  ASSERT_TRUE(c.ok()) << c.status();
  constexpr int kOps = 64;
  constexpr size_t kOp = 256 << 10;
  auto buf = (*c)->AllocateBuffer(kOps * kOp);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto stream = (*c)->OpenStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<std::promise<absl::Status>> done(kOps);
  for (int i = 0; i < kOps; ++i) {
    (*stream)->Submit(gdrstore::OpKind::kWrite, {"vol0", i * kOp * 3, kOp}, **buf, i * kOp,
                      [&done, i](absl::StatusOr<gdrstore::OpResult> r) {
                        done[i].set_value(r.status());
                      });
  }
  for (int i = 0; i < kOps; ++i) {
    EXPECT_TRUE(done[i].get_future().get().ok()) << "op " << i;
    EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), i * kOp * 3,
                              std::span((*buf)->data() + i * kOp, kOp)),
              std::nullopt)
        << "op " << i;
  }
  EXPECT_TRUE((*stream)->Close().ok());
}

TEST_F(LocalClientTest, AutoPicksLocalForADaemonOnThisHost) {
  auto c = Connect(gdrstore::Transport::kAuto);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->transport_info().kind, gdrstore::Transport::kLocal)
      << (*c)->transport_info().description;
}

TEST_F(LocalClientTest, MemoryTheCallerOwnsIsRefusedNamingAllocateBuffer) {
  auto c = Connect(gdrstore::Transport::kLocal);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::byte> mine(kMiB);
  auto buf = (*c)->RegisterHostMemory(mine.data(), mine.size());
  ASSERT_FALSE(buf.ok());
  EXPECT_EQ(buf.status().code(), absl::StatusCode::kFailedPrecondition) << buf.status();
  EXPECT_TRUE(absl::StrContains(buf.status().message(), "AllocateBuffer")) << buf.status();
}

TEST_F(LocalClientTest, AClientThatGoesAwayLeavesTheDaemonServingTheNext) {
  for (int round = 0; round < 3; ++round) {
    auto c = Connect(gdrstore::Transport::kLocal);
    ASSERT_TRUE(c.ok()) << c.status();
    auto buf = (*c)->AllocateBuffer(kMiB);
    ASSERT_TRUE(buf.ok()) << buf.status();
    ASSERT_TRUE((*c)->Write({"vol0", round * kMiB, kMiB}, **buf).ok());
    // The Client goes with its session (buffers first, then the transport).
    buf->reset();
    c->reset();
  }
  auto c = Connect(gdrstore::Transport::kLocal);
  ASSERT_TRUE(c.ok()) << c.status();
  auto buf = (*c)->AllocateBuffer(kMiB);
  ASSERT_TRUE(buf.ok()) << buf.status();
  EXPECT_TRUE((*c)->Write({"vol0", 0, kMiB}, **buf).ok());
}

TEST(LocalClientOffTest, ADaemonWithoutTheSocketRefusesLocalByNameAndAutoTakesTcp) {
  auto d = DaemonProcess::Start({"--volume", "vol0=4MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  gdrstore::ClientOptions o;
  o.daemon_address = (*d)->address();
  o.transport = gdrstore::Transport::kLocal;
  auto local = gdrstore::Client::Connect(o);
  ASSERT_FALSE(local.ok());
  EXPECT_TRUE(absl::StrContains(local.status().message(), "--local-socket")) << local.status();
  o.transport = gdrstore::Transport::kAuto;
  auto any = gdrstore::Client::Connect(o);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ((*any)->transport_info().kind, gdrstore::Transport::kTcp);
  auto buf = (*any)->AllocateBuffer(4096);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto got = (*any)->Write({"vol0", 0, 4096}, **buf);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->path, "tcp/host");

  // require=local: auto fails instead of taking tcp, saying why local was not picked.
  o.require = "local";
  auto strict = gdrstore::Client::Connect(o);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(strict.status().message(), "require=local")) << strict.status();
  EXPECT_TRUE(absl::StrContains(strict.status().message(), "--local-socket")) << strict.status();
  o.require = "local,nvlink";
  auto unknown = gdrstore::Client::Connect(o);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  o.require = "tcp,direct";
  auto tcp = gdrstore::Client::Connect(o);
  ASSERT_TRUE(tcp.ok()) << tcp.status();
}

}  // namespace
}  // namespace gdr::integ
