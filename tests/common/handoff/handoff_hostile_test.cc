// Hostile input on a HandoffServer's socket, sent by hand: each bad message is answered with an
// ERROR naming what is wrong (or, for what is not this protocol at all, the connection is
// closed), nothing is mapped that should not be, and after each a good client is still served.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "common/handoff/handoff_client.h"
#include "common/handoff/handoff_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/handoff/handoff_test_util.h"

namespace gdr::handoff {
namespace {

using ::testing::HasSubstr;
using test::ErrorIn;
using test::MakeSealedMemfd;
using test::RawPeer;

class HandoffHostileTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  void Start(HandoffServerOptions o) {
    auto t = test::StartTestServer(std::move(o));
    ASSERT_TRUE(t.ok()) << t.status();
    t_ = *std::move(t);
  }
  // A connection with its session open.
  RawPeer Session() {
    auto p = RawPeer::Connect(t_.path());
    EXPECT_TRUE(p.ok()) << p.status();
    auto ok = p->Hello("hostile");
    EXPECT_TRUE(ok.ok()) << ok.status();
    return *std::move(p);
  }
  // The server still serves a well-behaved client.
  void ExpectGoodClientServed() {
    auto c = HandoffClient::Connect(t_.path(), "good", absl::Seconds(30));
    ASSERT_TRUE(c.ok()) << c.status();
    auto m = MakeSealedMemfd(4096);
    ASSERT_TRUE(m.ok());
    Register r;
    r.address = reinterpret_cast<uint64_t>(m->bytes);
    r.size = 4096;
    auto rkey = (*c)->Register(r, m->fd.get());
    ASSERT_TRUE(rkey.ok()) << rkey.status();
    EXPECT_TRUE((*c)->Deregister(*rkey).ok());
  }
  // Sends `packet` (+ fds) on an open session and expects ERROR for `id` containing `what`,
  // with the connection still serving (a DEREGISTER of an unknown rkey is answered).
  void ExpectAnswered(RawPeer& p, const std::string& packet, const std::vector<int>& fds,
                      uint32_t id, const std::string& what) {
    ASSERT_TRUE(p.Send(packet, fds).ok());
    absl::StatusOr<Message> reply = p.Read();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->request_id, id);
    EXPECT_THAT(ErrorIn(reply).ToString(), HasSubstr(what));
    ASSERT_TRUE(p.Send(Message{id + 1, Deregister{12345}}).ok());
    EXPECT_THAT(ErrorIn(p.Read()).ToString(), HasSubstr("not registered"));
    ExpectGoodClientServed();
  }
  Register Memfd(const test::SealedMemfd& m, uint64_t size, uint64_t offset = 0) {
    Register r;
    r.address = 0x10000;
    r.size = size;
    r.offset = offset;
    return r;
  }
  test::TestServer t_;
};

TEST_F(HandoffHostileTest, MalformedRequestsAreAnsweredAndTheSessionGoesOn) {
  RawPeer p = Session();
  const std::string dereg = Encode({10, Deregister{7}});
  ExpectAnswered(p, dereg.substr(0, dereg.size() - 2), {}, 10, "a length past the packet");
  ExpectAnswered(p, dereg + "xx", {}, 10, "trailing bytes");
  std::string unknown = dereg;
  unknown[6] = 42;  // type
  ExpectAnswered(p, unknown, {}, 10, "unknown message type 42");
  ExpectAnswered(p, Encode({20, HelloOk{1, {}, "me"}}), {}, 20, "not a request a client sends");
  ExpectAnswered(p, Encode({20, Hello{"again"}}), {}, 20, "HELLO again");
  Register gpu;
  gpu.kind = MemoryKind::kGpuIpc;
  gpu.size = 4096;
  gpu.allocation_size = 1 << 21;
  gpu.gpu = "0000:b7:00.0";
  // Whatever the host's GPUs make of a made-up handle, it is an ERROR, never a region.
  ASSERT_TRUE(p.Send(Encode({30, gpu})).ok());
  absl::StatusOr<Message> gpu_reply = p.Read();
  ASSERT_TRUE(gpu_reply.ok()) << gpu_reply.status();
  EXPECT_TRUE(std::holds_alternative<Error>(gpu_reply->body));
  EXPECT_EQ(t_.server->stats().regions, 0u);
  EXPECT_GE(t_.server->stats().refused, 6u);
}

TEST_F(HandoffHostileTest, WrongDescriptorCountsAreRefused) {
  RawPeer p = Session();
  auto m = MakeSealedMemfd(4096);
  ASSERT_TRUE(m.ok());
  ExpectAnswered(p, Encode({1, Memfd(*m, 4096)}), {}, 1, "carries 0 descriptors; it takes 1");
  ExpectAnswered(p, Encode({1, Deregister{3}}), {m->fd.get()}, 1, "carries 1 descriptors");
  // Two descriptors: more than any message takes; refused, both closed, connection closed.
  ASSERT_TRUE(p.Send(Encode({2, Memfd(*m, 4096)}), {m->fd.get(), m->fd.get()}).ok());
  EXPECT_THAT(ErrorIn(p.Read()).ToString(), HasSubstr("more descriptors than the 1"));
  EXPECT_TRUE(p.ClosedByServer());
  ExpectGoodClientServed();
  // One descriptor on HELLO: refused before any session opens.
  auto q = RawPeer::Connect(t_.path());
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(q->Send(Encode({1, Hello{"fd"}}), {m->fd.get()}).ok());
  EXPECT_THAT(ErrorIn(q->Read()).ToString(), HasSubstr("HELLO carries 1 descriptors"));
  EXPECT_TRUE(q->ClosedByServer());
  ExpectGoodClientServed();
  EXPECT_EQ(t_.server->stats().regions, 0u);
}

TEST_F(HandoffHostileTest, DescriptorsThatAreNoSealedMemfdAreRefused) {
  RawPeer p = Session();
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  ScopedFd pr(pipe_fds[0]), pw(pipe_fds[1]);
  ScopedFd dir(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ScopedFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  const std::string file_path = t_.dir->File("plain");
  ScopedFd file(::open(file_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  ASSERT_EQ(::ftruncate(file.get(), 1 << 20), 0);
  auto m = MakeSealedMemfd(4096);
  ASSERT_TRUE(m.ok());
  const std::string reg = Encode({5, Memfd(*m, 4096)});
  ExpectAnswered(p, reg, {pr.get()}, 5, "not a memfd (it is a pipe)");
  ExpectAnswered(p, reg, {dir.get()}, 5, "not a memfd (it is a directory)");
  ExpectAnswered(p, reg, {devnull.get()}, 5, "not a memfd (it is a character device)");
  ExpectAnswered(p, reg, {file.get()}, 5, "memfd");  // a plain file takes no seals
  auto unsealed = MakeSealedMemfd(4096, /*seal=*/false);
  ASSERT_TRUE(unsealed.ok());
  ExpectAnswered(p, reg, {unsealed->fd.get()}, 5, "F_SEAL_SHRINK");
  ExpectAnswered(p, Encode({6, Memfd(*m, 4097)}), {m->fd.get()}, 6, "past the end of the memfd");
  ExpectAnswered(p, Encode({6, Memfd(*m, 1, 4096)}), {m->fd.get()}, 6, "past the end");
  ExpectAnswered(p, Encode({6, Memfd(*m, uint64_t{1} << 62, 1 << 20)}), {m->fd.get()}, 6,
                 "past the end");
  ExpectAnswered(p, Encode({6, Memfd(*m, 4096, UINT64_MAX - 10)}), {m->fd.get()}, 6,
                 "overflows");
  Register wraps = Memfd(*m, 4096);
  wraps.address = UINT64_MAX - 100;
  ExpectAnswered(p, Encode({6, wraps}), {m->fd.get()}, 6, "wraps around");
  // A writable region over a memfd this peer can only read.
  const std::string ro_path = "/proc/self/fd/" + std::to_string(m->fd.get());
  ScopedFd ro(::open(ro_path.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(ro.valid());
  ExpectAnswered(p, reg, {ro.get()}, 5, "read-write");
  EXPECT_EQ(t_.server->stats().regions, 0u);
  // Only this peer's session is left once the good clients' ends are seen.
  EXPECT_TRUE(
      integ::PollUntil([&] { return t_.server->stats().sessions == 1; }, absl::Seconds(30)));
}

TEST_F(HandoffHostileTest, WhatIsNotThisProtocolClosesOnlyThatConnection) {
  RawPeer bystander = Session();
  const std::string good = Encode({3, Deregister{9}});
  std::string bad_magic = good;
  bad_magic[0] = 'X';
  std::string bad_version = good;
  bad_version[4] = 9;
  for (const std::string& packet :
       {bad_magic, bad_version, good.substr(0, 10), std::string(2000, 'G')}) {
    RawPeer p = Session();
    ASSERT_TRUE(p.Send(packet).ok());
    absl::StatusOr<Message> reply = p.Read();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->request_id, 0u);
    EXPECT_TRUE(absl::IsInvalidArgument(ErrorIn(reply))) << ErrorIn(reply);
    EXPECT_TRUE(p.ClosedByServer());
    ExpectGoodClientServed();
  }
  // Before HELLO too.
  auto q = RawPeer::Connect(t_.path());
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(q->Send(bad_magic).ok());
  EXPECT_THAT(ErrorIn(q->Read()).ToString(), HasSubstr("bad magic"));
  EXPECT_TRUE(q->ClosedByServer());
  auto r = RawPeer::Connect(t_.path());
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->Send(good).ok());
  EXPECT_THAT(ErrorIn(r->Read()).ToString(), HasSubstr("must be HELLO, not DEREGISTER"));
  EXPECT_TRUE(r->ClosedByServer());
  // The bystander's session was never touched.
  ASSERT_TRUE(bystander.Send(good).ok());
  EXPECT_THAT(ErrorIn(bystander.Read()).ToString(), HasSubstr("not registered"));
}

TEST_F(HandoffHostileTest, SilentPeerIsDroppedAfterTheHelloTimeout) {
  HandoffServerOptions o;
  o.hello_timeout = absl::Milliseconds(200);
  Start(std::move(o));
  auto p = RawPeer::Connect(t_.path());
  ASSERT_TRUE(p.ok());
  absl::StatusOr<Message> reply = p->Read();  // says nothing; the server speaks first
  EXPECT_TRUE(absl::IsDeadlineExceeded(ErrorIn(reply))) << ErrorIn(reply);
  EXPECT_THAT(ErrorIn(reply).ToString(), HasSubstr("no HELLO within 200ms"));
  EXPECT_TRUE(p->ClosedByServer());
  ExpectGoodClientServed();
}

// A session that opens channels without end is refused at its limit, by the name the server
// was given for it; a channel whose end was closed frees its place (even when its number is
// reused at once), and the session's end shuts the rest down.
TEST_F(HandoffHostileTest, ChannelsPastTheSessionsLimitAreRefusedByName) {
  absl::Mutex mu;
  std::vector<ScopedFd> ours;  // the server's ends, as on_channel's owner holds them
  HandoffServerOptions o;
  o.max_channels_per_session = 3;
  o.names.max_channels_per_session = "--max-channels-per-client";
  o.on_channel = [&](const SessionInfo&, ScopedFd fd) {
    absl::MutexLock lock(&mu);
    ours.push_back(std::move(fd));
    return absl::OkStatus();
  };
  Start(std::move(o));
  auto c = HandoffClient::Connect(t_.path(), "channels", absl::Seconds(30));
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<ScopedFd> theirs;
  absl::Status refused;
  for (int i = 0; i < 50 && refused.ok(); ++i) {
    absl::StatusOr<ScopedFd> end = (*c)->OpenChannel();
    refused = end.status();
    if (end.ok()) theirs.push_back(*std::move(end));
  }
  EXPECT_EQ(theirs.size(), 3u);
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_THAT(refused.ToString(), HasSubstr("3 channels open, its limit "
                                            "(--max-channels-per-client=3)"));
  ExpectGoodClientServed();
  // The owner closes one end, and the number goes at once to another socket: the place is free.
  int again[2];
  {
    absl::MutexLock lock(&mu);
    ours.front().Reset();
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, again), 0);
  }
  ScopedFd a(again[0]), b(again[1]);
  absl::StatusOr<ScopedFd> fourth = (*c)->OpenChannel();
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  theirs.push_back(*std::move(fourth));
  EXPECT_TRUE(absl::IsResourceExhausted((*c)->OpenChannel().status()));
  // The session's end shuts its channels down; the unrelated socket is untouched.
  c->reset();
  for (const ScopedFd& end : theirs) {
    pollfd p{end.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 30000), 1) << "a channel outlived its session";
    char byte;
    EXPECT_EQ(::read(end.get(), &byte, 1), 0);
  }
  ASSERT_EQ(::write(a.get(), "x", 1), 1);
  char byte = 0;
  EXPECT_EQ(::read(b.get(), &byte, 1), 1);
}

TEST_F(HandoffHostileTest, ConnectionsPastMaxSessionsAreRefused) {
  HandoffServerOptions o;
  o.max_sessions = 3;
  o.names.max_sessions = "--max-clients";
  o.hello_timeout = absl::Seconds(60);
  Start(std::move(o));
  std::vector<RawPeer> holders;
  for (int i = 0; i < 3; ++i) {
    auto p = RawPeer::Connect(t_.path());
    ASSERT_TRUE(p.ok());
    holders.push_back(*std::move(p));
  }
  // The server counts a connection as soon as it accepts it; wait until all three are.
  ASSERT_TRUE(integ::PollUntil(
      [&] {
        auto c = HandoffClient::Connect(t_.path(), "probe", absl::Seconds(30));
        return absl::IsResourceExhausted(c.status());
      },
      absl::Seconds(30)));
  for (int i = 0; i < 20; ++i) {
    auto p = RawPeer::Connect(t_.path());
    ASSERT_TRUE(p.ok());
    absl::StatusOr<Message> reply = p->Read();
    EXPECT_TRUE(absl::IsResourceExhausted(ErrorIn(reply))) << ErrorIn(reply);
    EXPECT_THAT(ErrorIn(reply).ToString(),
                HasSubstr("3 connections, its limit (--max-clients=3)"));
    EXPECT_TRUE(p->ClosedByServer());
  }
  auto c = HandoffClient::Connect(t_.path(), "refused", absl::Seconds(30));
  EXPECT_TRUE(absl::IsResourceExhausted(c.status())) << c.status();
  holders.clear();  // their connections end; room comes back once the server sees it
  // A good client is served once it is. Each try is a connection that the server counts until
  // its thread has seen the end, so the one that gets in is the one checked, not a later one.
  auto m = MakeSealedMemfd(4096);
  ASSERT_TRUE(m.ok());
  Register r;
  r.address = reinterpret_cast<uint64_t>(m->bytes);
  r.size = 4096;
  ASSERT_TRUE(integ::PollUntil(
      [&] {
        auto later = HandoffClient::Connect(t_.path(), "later", absl::Seconds(30));
        return later.ok() && (*later)->Register(r, m->fd.get()).ok();
      },
      absl::Seconds(30)));
  EXPECT_GE(t_.server->stats().refused, 21u);
}


// Descriptors open in this process: the server's staged chunks are among them.
size_t OpenFds() {
  size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

Register VmmChunks(uint64_t allocation_size) {
  Register r;
  r.kind = MemoryKind::kGpuVmmChunks;
  r.address = 0x7f8000000000;
  r.size = 4096;
  r.offset = 100;
  r.allocation_size = allocation_size;
  r.gpu = "0000:b7:00.0";
  return r;
}

// Staged REGISTER_CHUNKs, out of step with their REGISTER, are refused by name and dropped
// (their descriptors closed); the session goes on.
TEST_F(HandoffHostileTest, ChunksOutOfStepWithTheirRegisterAreRefusedAndDropped) {
  RawPeer p = Session();
  auto m = MakeSealedMemfd(4096);
  ASSERT_TRUE(m.ok());
  const size_t fds_before = OpenFds();
  auto stage = [&](uint32_t id, uint32_t expect) {
    ASSERT_TRUE(p.Send(Message{id, RegisterChunk{4096}}, {m->fd.get()}).ok());
    absl::StatusOr<Message> reply = p.Read();
    ASSERT_TRUE(reply.ok()) << reply.status();
    ASSERT_TRUE(std::holds_alternative<ChunkStaged>(reply->body)) << ErrorIn(reply);
    EXPECT_EQ(std::get<ChunkStaged>(reply->body).staged, expect);
  };
  // Answered on this session alone: a good client's connection would move the count.
  auto refused = [&](const std::string& packet, const std::vector<int>& fds, uint32_t id,
                     const std::string& what) {
    ASSERT_TRUE(p.Send(packet, fds).ok());
    absl::StatusOr<Message> reply = p.Read();
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->request_id, id);
    EXPECT_THAT(ErrorIn(reply).ToString(), HasSubstr(what));
  };
  refused(Encode({1, VmmChunks(3 * 4096)}), {}, 1, "no REGISTER_CHUNK staged");
  stage(3, 1);
  stage(4, 2);
  EXPECT_EQ(OpenFds(), fds_before + 2);  // held until their REGISTER
  refused(Encode({5, Memfd(*m, 4096)}), {m->fd.get()}, 5, "while 2 REGISTER_CHUNKs are staged");
  EXPECT_EQ(OpenFds(), fds_before);
  refused(Encode({7, VmmChunks(3 * 4096)}), {}, 7, "no REGISTER_CHUNK staged");
  stage(9, 1);
  stage(10, 2);
  refused(Encode({11, VmmChunks(3 * 4096)}), {}, 11,
          "hold 12288 bytes; the 2 chunks staged hold 8192");
  EXPECT_EQ(OpenFds(), fds_before);
  // Sizes that add up reach the import, which a memfd (or a host without a driver) refuses:
  // an ERROR, never a region.
  stage(13, 1);
  stage(14, 2);
  stage(15, 3);
  ASSERT_TRUE(p.Send(Encode({16, VmmChunks(3 * 4096)})).ok());
  absl::StatusOr<Message> reply = p.Read();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(std::holds_alternative<Error>(reply->body));
  EXPECT_EQ(t_.server->stats().regions, 0u);
  EXPECT_EQ(OpenFds(), fds_before);
  ExpectAnswered(p, Encode({20, ChunkStaged{1}}), {}, 20, "not a request a client sends");
}

// A client that stages without end is stopped at the chunk limit or the descriptor reserve,
// whichever comes first, and what it staged is closed.
TEST_F(HandoffHostileTest, StagingWithoutEndIsStoppedAndReleased) {
  RawPeer p = Session();
  auto m = MakeSealedMemfd(4096);
  ASSERT_TRUE(m.ok());
  const size_t fds_before = OpenFds();
  absl::Status refused;
  uint32_t id = 1;
  for (; id <= kMaxChunks + 1 && refused.ok(); ++id) {
    ASSERT_TRUE(p.Send(Message{id, RegisterChunk{4096}}, {m->fd.get()}).ok());
    absl::StatusOr<Message> reply = p.Read();
    ASSERT_TRUE(reply.ok()) << reply.status();
    if (std::holds_alternative<Error>(reply->body)) refused = ErrorIn(reply);
  }
  ASSERT_FALSE(refused.ok()) << "staged " << kMaxChunks + 1 << " chunks";
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.ToString(), HasSubstr("dropped"));
  EXPECT_EQ(OpenFds(), fds_before);
  ExpectAnswered(p, Encode({id, VmmChunks(2 * 4096)}), {}, id, "no REGISTER_CHUNK staged");
}

}  // namespace
}  // namespace gdr::handoff
