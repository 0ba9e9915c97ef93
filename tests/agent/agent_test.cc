// gdragent's data path against a real gdrstored over tcp: a client hands the agent a memfd and
// opens a channel through its socket, and its gets and puts (unary and on a Stream) move bytes
// the daemon's pattern verifies; GetInfo and GetStats say what the agent is and what it did;
// requests the agent cannot serve are refused with the reason, the daemon's own errors come
// back with their codes.
#include <gmock/gmock.h>
#include <fcntl.h>
#include <grpcpp/create_channel_posix.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <set>
#include <span>

#include "absl/strings/str_cat.h"
#include "gdrstore/client.h"
#include "common/base/crc32c.h"
#include "common/base/pattern.h"
#include "tests/agent/agent_harness.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"

namespace gdr::agent::test {
namespace {

namespace v1 = gdrstore::v1;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kVolBytes = 64ull << 20;

std::span<const std::byte> Bytes(const SharedMemory& m, size_t offset, size_t n) {
  return {m.data() + offset, n};
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = integ::DaemonProcess::Start({"--volume", "vol0=64MiB"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    auto a = AgentProcess::Start(daemon_->address(), {});
    ASSERT_TRUE(a.ok()) << a.status();
    agent_ = *std::move(a);
    auto c = AgentClient::Connect(agent_->socket_path(), "agent_test");
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
    auto m = SharedMemory::Create(4 << 20);
    ASSERT_TRUE(m.ok()) << m.status();
    mem_ = *std::move(m);
    auto rkey = client_.Register(*mem_);
    ASSERT_TRUE(rkey.ok()) << rkey.status();
    rkey_ = *rkey;
  }

  std::unique_ptr<integ::DaemonProcess> daemon_;
  std::unique_ptr<AgentProcess> agent_;
  AgentClient client_;
  std::unique_ptr<SharedMemory> mem_;
  uint32_t rkey_ = 0;
};

TEST_F(AgentTest, GetsAndPutsMoveVerifiedBytes) {
  // A get: store bytes land in the client's memfd at an interior offset.
  const uint64_t n = 1 << 20;
  auto got = client_.Get("vol0", 12345, client_.Describe(*mem_, rkey_, 4096, n));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes(), n);
  // The agent names its own hop (host memory over tcp); the caller puts its hop before it.
  EXPECT_EQ(got->path(), "tcp/host");
  std::optional<size_t> bad = PatternMismatch(PatternSeed("vol0"), 12345, Bytes(*mem_, 4096, n));
  EXPECT_FALSE(bad.has_value()) << "first wrong byte at " << *bad;

  // A put of salted bytes, read back into another part of the memory.
  const uint64_t salt_seed = PatternSeed("vol0", 7);
  PatternFill(salt_seed, 0, {mem_->data(), n});
  auto put = client_.Put("vol0", 8 << 20, client_.Describe(*mem_, rkey_, 0, n));
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->bytes(), n);
  std::memset(mem_->data() + (2 << 20), 0, n);
  got = client_.Get("vol0", 8 << 20, client_.Describe(*mem_, rkey_, 2 << 20, n));
  ASSERT_TRUE(got.ok()) << got.status();
  bad = PatternMismatch(salt_seed, 0, Bytes(*mem_, 2 << 20, n));
  EXPECT_FALSE(bad.has_value()) << "first wrong byte at " << *bad;

  // The daemon's own CRC32C comes through.
  got = client_.Get("vol0", 777, client_.Describe(*mem_, rkey_, 0, 65536), /*crc32c=*/true);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_crc32c());
  EXPECT_EQ(got->crc32c(), Crc32c(mem_->data(), 65536));

  // The daemon served them as ops of its own, from the agent's tcp target.
  auto direct = integ::ConnectClient(*daemon_);
  ASSERT_NE(direct, nullptr);
  auto stats = integ::GetStats(*direct);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->total().write_ops(), 3u);
  EXPECT_EQ(stats->total().read_ops(), 1u);
}

TEST_F(AgentTest, StreamOpsMoveVerifiedBytes) {
  constexpr int kOps = 64;
  constexpr uint64_t kPiece = 65536;
  grpc::ClientContext ctx;
  auto stream = client_.stub->Stream(&ctx);
  v1::StreamRequest req;
  for (int i = 0; i < kOps; ++i) {
    v1::StreamOp* op = req.add_ops();
    op->set_id(100 + i);
    v1::WriteRequest* w = op->mutable_write();
    w->mutable_extent()->set_volume("vol0");
    w->mutable_extent()->set_offset(kVolBytes - (i + 1) * 1000003ull);
    w->mutable_extent()->set_length(kPiece);
    *w->mutable_buffer() = client_.Describe(*mem_, rkey_, i * kPiece, kPiece);
  }
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->WritesDone());
  std::set<uint64_t> answered;
  v1::StreamResponse resp;
  while (stream->Read(&resp)) {
    for (const v1::StreamResult& r : resp.results()) {
      EXPECT_EQ(r.code(), 0) << r.message();
      EXPECT_EQ(r.bytes(), kPiece);
      EXPECT_TRUE(answered.insert(r.id()).second) << "answered twice: " << r.id();
    }
  }
  grpc::Status st = stream->Finish();
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(answered.size(), static_cast<size_t>(kOps));
  for (int i = 0; i < kOps; ++i) {
    const uint64_t offset = kVolBytes - (i + 1) * 1000003ull;
    std::optional<size_t> bad =
        PatternMismatch(PatternSeed("vol0"), offset, Bytes(*mem_, i * kPiece, kPiece));
    EXPECT_FALSE(bad.has_value()) << "op " << i << ": first wrong byte at " << *bad;
  }
}

TEST_F(AgentTest, TheLibraryNamesThePathThroughTheAgentAndFailsWhatRequireRulesOut) {
  gdrstore::ClientOptions o;
  o.agent = agent_->socket_path();
  auto c = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto buf = (*c)->AllocateBuffer(1 << 20);
  ASSERT_TRUE(buf.ok()) << buf.status();
  EXPECT_EQ((*c)->PathOf(**buf), "agent/host");
  auto got = (*c)->Write({"vol0", 4096, 1 << 20}, **buf);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->path, "agent/host>tcp/host");
  auto stream = (*c)->OpenStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::promise<absl::StatusOr<gdrstore::OpResult>> answered;
  (*stream)->Submit(gdrstore::OpKind::kRead, {"vol0", 0, 4096}, **buf, 0,
                    [&answered](absl::StatusOr<gdrstore::OpResult> r) {
                      answered.set_value(std::move(r));
                    });
  absl::StatusOr<gdrstore::OpResult> put = answered.get_future().get();
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(put->path, "agent/host>tcp/host");
  ASSERT_TRUE((*stream)->Close().ok());

  // direct rules the agent out at once; rc only once the agent's answer names its hop.
  o.require = "direct";
  auto direct = gdrstore::Client::Connect(o);
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(direct.status().message()), HasSubstr("require=direct"));
  o.require = "rc";
  auto rc = gdrstore::Client::Connect(o);
  ASSERT_TRUE(rc.ok()) << rc.status();
  auto rbuf = (*rc)->AllocateBuffer(4096);
  ASSERT_TRUE(rbuf.ok()) << rbuf.status();
  auto refused = (*rc)->Write({"vol0", 0, 4096}, **rbuf);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("agent/host>tcp/host"));
}

// The agent and a daemon on one host: the daemon is handed the clients' memfds as they came
// (relayed, not copied), and bytes move verified both ways.
TEST(AgentLocalUpstreamTest, TheDaemonIsHandedTheClientsMemoryAsItCame) {
  auto dir = integ::TempDir::Create("agent-local");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string sock = (*dir)->File("daemon.sock");
  auto d = integ::DaemonProcess::Start({"--volume", "vol0=64MiB", "--local-socket", sock});
  ASSERT_TRUE(d.ok()) << d.status();
  auto a = AgentProcess::Start((*d)->address(), {"--transport", "local"});
  ASSERT_TRUE(a.ok()) << a.status();
  gdrstore::ClientOptions o;
  o.agent = (*a)->socket_path();
  o.require = "agent,local";
  auto c = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  const size_t n = (4 << 20) + 5;
  auto buf = (*c)->AllocateBuffer(n);
  ASSERT_TRUE(buf.ok()) << buf.status();
  std::span<std::byte> bytes((*buf)->data(), n);
  auto got = (*c)->Write({"vol0", 999, n}, **buf);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->path, "agent/host>local/host");
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), 999, bytes), std::nullopt);
  PatternFill(PatternSeed("vol0", 3), 0, bytes);
  ASSERT_TRUE((*c)->Read({"vol0", 8 << 20, n}, **buf).ok());
  auto back = (*c)->AllocateBuffer(n);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE((*c)->Write({"vol0", 8 << 20, n}, **back).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0", 3), 0, std::span((*back)->data(), n)),
            std::nullopt);
  // The daemon holds the agent's session with both regions (the memfds it was handed).
  gdrstore::ClientOptions direct;
  direct.daemon_address = (*d)->address();
  auto dc = gdrstore::Client::Connect(direct);
  ASSERT_TRUE(dc.ok()) << dc.status();
  auto info = (*dc)->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  bool seen = false;
  for (const auto& t : info->transports()) {
    if (t.transport() == v1::TRANSPORT_LOCAL) {
      seen = true;
      EXPECT_THAT(t.detail(), HasSubstr("1 sessions, 2 regions")) << t.detail();
    }
  }
  EXPECT_TRUE(seen);
}

TEST_F(AgentTest, InfoNamesTheLocalTransportAndThePathToTheDaemon) {
  auto info = client_.Info();
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->transports_size(), 1);
  EXPECT_EQ(info->transports(0).transport(), v1::TRANSPORT_LOCAL);
  EXPECT_TRUE(info->transports(0).available());
  EXPECT_THAT(info->transports(0).detail(),
              HasSubstr(absl::StrCat("agent -> ", daemon_->address(), " over tcp")));
  ASSERT_EQ(info->volumes_size(), 1);
  EXPECT_EQ(info->volumes(0).name(), "vol0");
  EXPECT_EQ(info->volumes(0).size(), kVolBytes);
  EXPECT_EQ(info->local().socket_path(), agent_->socket_path());
  EXPECT_FALSE(info->local().host_id().empty());
  EXPECT_EQ(info->limits().max_inflight_ops(), 1024u);  // the agent's per-client default

  ASSERT_TRUE(client_.Get("vol0", 0, client_.Describe(*mem_, rkey_, 0, 4096)).ok());
  auto stats = client_.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  const v1::AgentStats& a = stats->agent();
  EXPECT_THAT(a.upstream(), HasSubstr(absl::StrCat("agent -> ", daemon_->address(), " over tcp")));
  EXPECT_EQ(a.regions(), 1u);
  EXPECT_EQ(a.registered_bytes(), mem_->size());
  EXPECT_EQ(a.upstream_registrations(), 1u);
  ASSERT_EQ(a.clients_size(), 1);
  EXPECT_EQ(a.clients(0).pid(), static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(a.clients(0).uid(), ::getuid());
  EXPECT_EQ(a.clients(0).name(), "agent_test");
  EXPECT_EQ(a.clients(0).regions(), 1u);
  EXPECT_EQ(a.clients(0).ops().write_ops(), 1u);
  EXPECT_EQ(a.clients(0).ops().write_bytes(), 4096u);
  EXPECT_EQ(stats->total().write_ops(), 1u);
}

TEST_F(AgentTest, RefusesWhatItCannotServeAndPassesTheDaemonsErrors) {
  // Another transport's endpoint.
  v1::RemoteBuffer tcp = client_.Describe(*mem_, rkey_, 0, 4096);
  tcp.mutable_tcp()->set_host("127.0.0.1");
  tcp.mutable_tcp()->set_port(1);
  auto r = client_.Get("vol0", 0, tcp);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented) << r.status();
  EXPECT_THAT(std::string(r.status().message()), StartsWith("gdragent: "));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("local transport"));

  // A key that is not the session's.
  v1::RemoteBuffer wrong = client_.Describe(*mem_, rkey_, 0, 4096);
  wrong.mutable_local()->set_key(std::string(16, 'x'));
  r = client_.Get("vol0", 0, wrong);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied) << r.status();

  // Past the end of the region.
  r = client_.Get("vol0", 0, client_.Describe(*mem_, rkey_, mem_->size() - 100, 4096));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();

  // No such rkey.
  r = client_.Get("vol0", 0, client_.Describe(*mem_, rkey_ ^ 0x5a5a, 0, 4096));
  EXPECT_FALSE(r.ok());

  // The daemon's answer, code kept, said to come through the agent.
  r = client_.Get("nosuchvolume", 0, client_.Describe(*mem_, rkey_, 0, 4096));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              StartsWith(absl::StrCat("gdragent: daemon ", daemon_->address(), ": ")));
  r = client_.Get("vol0", kVolBytes - 100, client_.Describe(*mem_, rkey_, 0, 4096));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange) << r.status();

  // Memory handed over read-only takes puts, never gets.
  auto ro_mem = SharedMemory::Create(1 << 20);
  ASSERT_TRUE(ro_mem.ok());
  auto ro = client_.Register(**ro_mem, /*writable=*/false);
  ASSERT_TRUE(ro.ok()) << ro.status();
  r = client_.Get("vol0", 0, client_.Describe(**ro_mem, *ro, 0, 4096));
  EXPECT_FALSE(r.ok());
  PatternFill(PatternSeed("vol0", 3), 0, {(*ro_mem)->data(), 4096});
  auto put = client_.Put("vol0", 1 << 20, client_.Describe(**ro_mem, *ro, 0, 4096));
  EXPECT_TRUE(put.ok()) << put.status();

  // Requests without what every op needs.
  grpc::ClientContext ctx;
  v1::WriteRequest empty;
  v1::OpResponse resp;
  grpc::Status s = client_.stub->Write(&ctx, empty, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();

  // None of it hurt: a good op still goes through.
  auto ok = client_.Get("vol0", 0, client_.Describe(*mem_, rkey_, 0, 4096));
  EXPECT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(agent_->Running());
}

TEST_F(AgentTest, TheChannelsSocketIsTheAgentsOwnFile) {
  // A second channel: the agent's end is non-blocking for its pollers, and that flag is not on
  // the client's end, which is another open file the client may set as it likes.
  absl::StatusOr<ScopedFd> end = client_.session->OpenChannel();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(::fcntl(end->get(), F_GETFL) & O_NONBLOCK, 0);
  const int fd = end->Release();
  auto channel = grpc::CreateInsecureChannelFromFd("gdragent", fd);
  auto stub = v1::GdrStore::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetInfoResponse info;
  ASSERT_TRUE(stub->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok());
  EXPECT_EQ(info.local().socket_path(), agent_->socket_path());
  // The session and its first channel go on.
  auto ok = client_.Get("vol0", 0, client_.Describe(*mem_, rkey_, 0, 4096));
  EXPECT_TRUE(ok.ok()) << ok.status();
}

}  // namespace
}  // namespace gdr::agent::test
