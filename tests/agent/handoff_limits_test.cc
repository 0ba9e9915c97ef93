// What one client may hold of gdragent and of gdrstored's local socket (both handoff servers),
// with real processes: a session that opens channels without end, or registers memfd after
// memfd, is refused at its own limit, named by the flag that sets it, while another client
// still opens a channel, registers and moves verified bytes; a region holds no descriptor of
// the server; and with a low RLIMIT_NOFILE (lowered by prlimit under the running server) a
// flood of sessions stops at the descriptor reserve, so the clients already served go on and a
// new one is served once the flood ends.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/pattern.h"
#include "common/handoff/handoff_client.h"
#include "gdrstore/client.h"
#include "common/grpc/grpc_status.h"
#include "tests/agent/agent_harness.h"
#include "tests/integration/daemon_process.h"

namespace gdr::agent::test {
namespace {

namespace v1 = gdrstore::v1;
using ::testing::HasSubstr;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

std::unique_ptr<integ::DaemonProcess> StartDaemon(std::vector<std::string> args = {}) {
  args.insert(args.begin(), {"--volume", "vol0=64MiB"});
  auto d = integ::DaemonProcess::Start(args);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *std::move(d) : nullptr;
}

// Lowers the soft RLIMIT_NOFILE of `pid` to what it has open now plus `headroom`; the limit.
absl::StatusOr<uint64_t> LowerFdLimit(pid_t pid, int headroom) {
  absl::StatusOr<int> open = integ::CountOpenFds(pid);
  if (!open.ok()) return open.status();
  rlimit old{};
  if (::prlimit(pid, RLIMIT_NOFILE, nullptr, &old) != 0) {
    return absl::ErrnoToStatus(errno, "prlimit (read)");
  }
  rlimit lowered = old;
  lowered.rlim_cur = static_cast<rlim_t>(*open + headroom);
  if (::prlimit(pid, RLIMIT_NOFILE, &lowered, nullptr) != 0) {
    return absl::ErrnoToStatus(errno, "prlimit (lower)");
  }
  return static_cast<uint64_t>(lowered.rlim_cur);
}

// Opens channels on `session` until one is refused, at most `most`; keeps the client's ends in
// `ends` (each channel lives while its end is held). The refusal, or OK after `most`.
absl::Status OpenChannelsUntilRefused(handoff::HandoffClient& session, size_t most,
                                      std::vector<ScopedFd>* ends) {
  for (size_t i = 0; i < most; ++i) {
    absl::StatusOr<ScopedFd> end = session.OpenChannel();
    if (!end.ok()) return end.status();
    ends->push_back(*std::move(end));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> RegisterMemfd(handoff::HandoffClient& session, const SharedMemory& m) {
  handoff::Register r;
  r.kind = handoff::MemoryKind::kHostMemfd;
  r.writable = true;
  r.address = m.address();
  r.size = m.size();
  return session.Register(r, m.fd());
}

// True once the peer of `fd` has closed: a read returns 0 (within 30 s).
bool ReadsEnd(int fd) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    const int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (::poll(&p, 1, std::max(left, 1)) <= 0) continue;
    char b;
    const ssize_t r = ::read(fd, &b, 1);
    if (r == 0) return true;
    if (r < 0 && errno != EINTR && errno != EAGAIN) return true;  // reset counts as the end
  }
  return false;
}

// A client of the agent through everything a client does: a session, a channel, memory handed
// over, a get whose bytes are checked against the store's pattern. The first failure.
absl::Status ServedByAgent(const std::string& socket, const std::string& name) {
  absl::StatusOr<AgentClient> c = AgentClient::Connect(socket, name);
  if (!c.ok()) return c.status();
  absl::StatusOr<std::unique_ptr<SharedMemory>> m = SharedMemory::Create(1 << 20);
  if (!m.ok()) return m.status();
  absl::StatusOr<uint32_t> rkey = c->Register(**m);
  if (!rkey.ok()) return rkey.status();
  const uint64_t n = 256 << 10;
  auto got = c->Get("vol0", 4096, c->Describe(**m, *rkey, 8192, n));
  if (!got.ok()) return got.status();
  if (PatternMismatch(PatternSeed("vol0"), 4096, std::span((*m)->data() + 8192, n))) {
    return absl::DataLossError("the get's bytes are not the store's");
  }
  return absl::OkStatus();
}

// The same for the daemon's local socket, through the client library's transport local.
absl::Status ServedByDaemon(gdrstore::Client& c) {
  const size_t n = (1 << 20) + 77;
  auto buf = c.AllocateBuffer(n);
  if (!buf.ok()) return buf.status();
  auto got = c.Write({"vol0", 999, n}, **buf);
  if (!got.ok()) return got.status();
  if (PatternMismatch(PatternSeed("vol0"), 999, std::span((*buf)->data(), n))) {
    return absl::DataLossError("the get's bytes are not the store's");
  }
  return absl::OkStatus();
}

TEST(HandoffLimitsTest, AgentChannelsPastTheLimitAreRefusedWhileAnotherClientIsServed) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto agent = AgentProcess::Start(daemon->address(), {"--max-channels-per-client", "8"});
  ASSERT_TRUE(agent.ok()) << agent.status();
  const std::string socket = (*agent)->socket_path();
  auto hostile = handoff::HandoffClient::Connect(socket, "hostile", absl::Seconds(10));
  ASSERT_TRUE(hostile.ok()) << hostile.status();
  std::vector<ScopedFd> ends;
  const absl::Status refused = OpenChannelsUntilRefused(**hostile, 64, &ends);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(Msg(refused), HasSubstr("--max-channels-per-client=8"));
  EXPECT_EQ(ends.size(), 8u);
  // The refusal ended nothing: the session and the others are served.
  EXPECT_TRUE((*hostile)->status().ok()) << (*hostile)->status();
  const absl::Status served = ServedByAgent(socket, "bystander");
  EXPECT_TRUE(served.ok()) << served;

  // A channel the client closed gives its place back once the agent has closed its end.
  ends.pop_back();
  EXPECT_TRUE(integ::PollUntil(
      [&] {
        absl::StatusOr<ScopedFd> end = (*hostile)->OpenChannel();
        if (end.ok()) ends.push_back(*std::move(end));
        return end.ok();
      },
      absl::Seconds(30)));
  // A channel lives no longer than its session: the session's end closes them all.
  (*hostile)->Close();
  for (const ScopedFd& end : ends) EXPECT_TRUE(ReadsEnd(end.get()));
  EXPECT_TRUE((*agent)->Running());
}

TEST(HandoffLimitsTest, AgentRegionsPastTheLimitAreRefusedAndHoldNoDescriptor) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto agent = AgentProcess::Start(daemon->address(), {"--max-regions-per-client", "200"});
  ASSERT_TRUE(agent.ok()) << agent.status();
  const std::string socket = (*agent)->socket_path();
  auto hostile = AgentClient::Connect(socket, "hostile");
  ASSERT_TRUE(hostile.ok()) << hostile.status();
  absl::StatusOr<int> before = integ::CountOpenFds((*agent)->pid());
  ASSERT_TRUE(before.ok()) << before.status();
  std::vector<std::unique_ptr<SharedMemory>> memory;
  uint32_t last_rkey = 0;
  absl::Status refused;
  for (int i = 0; i < 400 && refused.ok(); ++i) {
    auto m = SharedMemory::Create(4096);
    ASSERT_TRUE(m.ok()) << m.status();
    absl::StatusOr<uint32_t> rkey = hostile->Register(**m);
    refused = rkey.status();
    if (!rkey.ok()) break;
    last_rkey = *rkey;
    memory.push_back(*std::move(m));
  }
  EXPECT_EQ(memory.size(), 200u);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(Msg(refused), HasSubstr("--max-regions-per-client=200"));
  // The mappings keep the memory: 200 regions cost the agent no descriptor each (they cost it
  // two, its import's and its upstream registration's, before).
  absl::StatusOr<int> after = integ::CountOpenFds((*agent)->pid());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_LT(*after - *before, 50) << integ::DescribeOpenFds((*agent)->pid());
  const absl::Status served = ServedByAgent(socket, "bystander");
  EXPECT_TRUE(served.ok()) << served;
  // Its regions, descriptors closed, still move bytes.
  auto got = hostile->Get("vol0", 0, hostile->Describe(*memory.back(), last_rkey, 0, 4096));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(PatternMismatch(PatternSeed("vol0"), 0, std::span(memory.back()->data(), 4096)));
}

// Stream calls a client holds open, and what one request may make the agent buffer.
TEST(HandoffLimitsTest, AgentStreamsPastTheLimitAndOversizedRequestsAreRefused) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto agent = AgentProcess::Start(daemon->address(), {"--max-streams-per-client", "4"});
  ASSERT_TRUE(agent.ok()) << agent.status();
  const std::string socket = (*agent)->socket_path();
  auto hostile = AgentClient::Connect(socket, "hostile");
  ASSERT_TRUE(hostile.ok()) << hostile.status();
  using Stream = grpc::ClientReaderWriter<v1::StreamRequest, v1::StreamResponse>;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<Stream>> open;
  // A Stream is known started once an op on it is answered.
  auto start = [&]() -> absl::Status {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    std::unique_ptr<Stream> s = hostile->stub->Stream(contexts.back().get());
    v1::StreamRequest req;
    v1::StreamOp* op = req.add_ops();
    op->set_id(1);
    op->mutable_write();  // no extent: answered INVALID_ARGUMENT, the call goes on
    v1::StreamResponse resp;
    if (s->Write(req) && s->Read(&resp)) {
      open.push_back(std::move(s));
      return absl::OkStatus();
    }
    return FromGrpcStatus(s->Finish());
  };
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(start().ok()) << i;
  absl::Status refused = start();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(Msg(refused), HasSubstr("--max-streams-per-client=4"));
  // Another client's Streams are its own.
  auto other = AgentClient::Connect(socket, "other");
  ASSERT_TRUE(other.ok()) << other.status();
  {
    grpc::ClientContext ctx;
    auto s = other->stub->Stream(&ctx);
    ASSERT_TRUE(s->WritesDone());
    v1::StreamResponse resp;
    EXPECT_FALSE(s->Read(&resp));
    const grpc::Status st = s->Finish();
    EXPECT_TRUE(st.ok()) << st.error_message();
  }
  // A Stream that ends gives its place back.
  ASSERT_TRUE(open.back()->WritesDone());
  EXPECT_TRUE(open.back()->Finish().ok());
  open.pop_back();
  EXPECT_TRUE(integ::PollUntil([&] { return start().ok(); }, absl::Seconds(30)));

  // A request past 1 MiB is not taken in (the agent would have buffered 4 MiB).
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::WriteRequest big;
  big.mutable_extent()->set_volume(std::string(2 << 20, 'v'));
  v1::OpResponse resp;
  const grpc::Status st = other->stub->Write(&ctx, big, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  for (auto& s : open) {
    s->WritesDone();
    (void)s->Finish();
  }
}

TEST(HandoffLimitsTest, AgentUnderALowDescriptorLimitServesOthersPastOneClientsLimit) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto agent = AgentProcess::Start(daemon->address(), {});
  ASSERT_TRUE(agent.ok()) << agent.status();
  const std::string socket = (*agent)->socket_path();
  // A client served before the limit comes down; its channel and connections are open.
  auto served = AgentClient::Connect(socket, "served");
  ASSERT_TRUE(served.ok()) << served.status();
  auto mem = SharedMemory::Create(1 << 20);
  ASSERT_TRUE(mem.ok()) << mem.status();
  auto rkey = served->Register(**mem);
  ASSERT_TRUE(rkey.ok()) << rkey.status();
  ASSERT_TRUE(served->Get("vol0", 0, served->Describe(**mem, *rkey, 0, 4096)).ok());
  absl::StatusOr<uint64_t> limit = LowerFdLimit((*agent)->pid(), 48);
  ASSERT_TRUE(limit.ok()) << limit.status();

  // One client opening channels without end stops at its own limit, derived from the lowered
  // RLIMIT_NOFILE, far from the agent's.
  auto hostile = handoff::HandoffClient::Connect(socket, "hostile", absl::Seconds(10));
  ASSERT_TRUE(hostile.ok()) << hostile.status();
  std::vector<ScopedFd> ends;
  absl::Status refused = OpenChannelsUntilRefused(**hostile, 200, &ends);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(Msg(refused), HasSubstr("--max-channels-per-client"));
  EXPECT_LT(ends.size(), 16u);
  absl::Status second = ServedByAgent(socket, "second");
  EXPECT_TRUE(second.ok()) << second;

  // Many sessions: refused at the reserve, named, before the agent runs out.
  std::vector<std::unique_ptr<handoff::HandoffClient>> flood;
  refused = absl::OkStatus();
  for (int i = 0; i < 200 && refused.ok(); ++i) {
    auto s = handoff::HandoffClient::Connect(socket, "flood", absl::Seconds(10));
    if (!s.ok()) {
      refused = s.status();
      break;
    }
    absl::Status channels = OpenChannelsUntilRefused(**s, 200, &ends);
    flood.push_back(*std::move(s));
    // A refusal at the session's own channel limit moves on to the next session.
    if (absl::StrContains(channels.message(), "keeps the last")) refused = channels;
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(Msg(refused), HasSubstr("--fd-reserve"));
  EXPECT_THAT(Msg(refused), HasSubstr(absl::StrCat(" of its ", *limit, " descriptors")));
  // The client served before goes on.
  auto got = served->Get("vol0", 4096, served->Describe(**mem, *rkey, 0, 64 << 10));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(PatternMismatch(PatternSeed("vol0"), 4096, std::span((*mem)->data(), 64 << 10)));
  // Once the flood ends, a new client is served again.
  flood.clear();
  ends.clear();
  hostile->reset();
  EXPECT_TRUE(integ::PollUntil([&] { return ServedByAgent(socket, "after").ok(); },
                               absl::Seconds(30)));
  EXPECT_TRUE((*agent)->Running());
}

// Registers `n` memfds of one page on `session` (kept in `memory`): the first refusal, or OK.
absl::Status RegisterMemfds(handoff::HandoffClient& session, int n,
                            std::vector<std::unique_ptr<SharedMemory>>* memory) {
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::unique_ptr<SharedMemory>> m = SharedMemory::Create(4096);
    if (!m.ok()) return m.status();
    if (absl::Status s = RegisterMemfd(session, **m).status(); !s.ok()) return s;
    memory->push_back(*std::move(m));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<gdrstore::Client>> LocalClientOf(
    const integ::DaemonProcess& daemon) {
  gdrstore::ClientOptions o;
  o.daemon_address = daemon.address();
  o.transport = gdrstore::Transport::kLocal;
  return gdrstore::Client::Connect(o);
}

TEST(HandoffLimitsTest, DaemonLocalRegionsPastTheLimitAreRefusedByItsFlag) {
  auto dir = integ::TempDir::Create("handoff-limits");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string socket = (*dir)->File("local.sock");
  auto daemon = StartDaemon({"--local-socket", socket, "--local-max-regions-per-client", "100"});
  ASSERT_NE(daemon, nullptr);
  auto hostile = handoff::HandoffClient::Connect(socket, "hostile", absl::Seconds(10));
  ASSERT_TRUE(hostile.ok()) << hostile.status();
  absl::StatusOr<int> before = integ::CountOpenFds(daemon->pid());
  ASSERT_TRUE(before.ok()) << before.status();
  std::vector<std::unique_ptr<SharedMemory>> memory;
  ASSERT_TRUE(RegisterMemfds(**hostile, 100, &memory).ok());
  const absl::Status refused = RegisterMemfds(**hostile, 1, &memory);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(Msg(refused), HasSubstr("--local-max-regions-per-client=100"));
  absl::StatusOr<int> after = integ::CountOpenFds(daemon->pid());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_LT(*after - *before, 25) << integ::DescribeOpenFds(daemon->pid());
  auto second = LocalClientOf(*daemon);
  ASSERT_TRUE(second.ok()) << second.status();
  const absl::Status served = ServedByDaemon(**second);
  EXPECT_TRUE(served.ok()) << served;
}

TEST(HandoffLimitsTest, DaemonLocalSocketUnderALowDescriptorLimitServesOthersPastOneClients) {
  auto dir = integ::TempDir::Create("handoff-limits");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string socket = (*dir)->File("local.sock");
  auto daemon = StartDaemon({"--local-socket", socket});
  ASSERT_NE(daemon, nullptr);
  absl::StatusOr<uint64_t> limit = LowerFdLimit(daemon->pid(), 48);
  ASSERT_TRUE(limit.ok()) << limit.status();

  // One client registering memfd after memfd, three times as many as the daemon has
  // descriptors to spare: a region holds none, so they all go.
  auto hostile = handoff::HandoffClient::Connect(socket, "hostile", absl::Seconds(10));
  ASSERT_TRUE(hostile.ok()) << hostile.status();
  std::vector<std::unique_ptr<SharedMemory>> memory;
  const absl::Status registered = RegisterMemfds(**hostile, 150, &memory);
  EXPECT_TRUE(registered.ok()) << registered;

  // Another client hands memory over and moves verified bytes.
  auto second = LocalClientOf(*daemon);
  ASSERT_TRUE(second.ok()) << second.status();
  absl::Status served = ServedByDaemon(**second);
  EXPECT_TRUE(served.ok()) << served;

  // A flood of sessions is refused at the reserve, named; the client served goes on.
  std::vector<std::unique_ptr<handoff::HandoffClient>> flood;
  absl::Status refused;
  for (int i = 0; i < 200; ++i) {
    auto s = handoff::HandoffClient::Connect(socket, "flood", absl::Seconds(10));
    if (!s.ok()) {
      refused = s.status();
      break;
    }
    flood.push_back(*std::move(s));
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(Msg(refused), HasSubstr("--local-fd-reserve"));
  EXPECT_THAT(Msg(refused), HasSubstr(absl::StrCat(" of its ", *limit, " descriptors")));
  served = ServedByDaemon(**second);
  EXPECT_TRUE(served.ok()) << served;
  flood.clear();
  hostile->reset();
  EXPECT_TRUE(integ::PollUntil(
      [&] {
        auto c = LocalClientOf(*daemon);
        return c.ok() && ServedByDaemon(**c).ok();
      },
      absl::Seconds(30)));
  EXPECT_TRUE(daemon->Running());
}

}  // namespace
}  // namespace gdr::agent::test
