// HandoffServer and HandoffClient over a real Unix socket in one process: a memfd region handed
// over is the same memory on both sides, Resolve checks key, rkey, range and writability,
// limits and callbacks answer with errors naming what is wrong, Stop ends everything.
#include "common/handoff/handoff_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <set>

#include "absl/synchronization/mutex.h"
#include "common/handoff/handoff_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/handoff/handoff_test_util.h"

namespace gdr::handoff {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using test::MakeSealedMemfd;
using test::StartTestServer;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

std::unique_ptr<HandoffClient> MustConnect(const std::string& path, const std::string& name) {
  auto c = HandoffClient::Connect(path, name, absl::Seconds(30));
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

Register HostRegion(const test::SealedMemfd& m, uint64_t offset, uint64_t size, bool writable) {
  Register r;
  r.kind = MemoryKind::kHostMemfd;
  r.writable = writable;
  r.address = reinterpret_cast<uint64_t>(m.bytes) + offset;
  r.offset = offset;
  r.size = size;
  return r;
}

TEST(HandoffServerTest, RegionIsTheSameMemoryOnBothSides) {
  std::atomic<int> registered{0};
  HandoffServerOptions o;
  o.server_name = "test-server 1";
  o.on_register = [&](const SessionInfo& s, const std::shared_ptr<ImportedRegion>& r) {
    EXPECT_NE(r->rkey(), 0u);
    EXPECT_EQ(s.name, "round trip");
    registered++;
    return absl::OkStatus();
  };
  auto t = StartTestServer(std::move(o));
  ASSERT_TRUE(t.ok()) << t.status();
  auto client = MustConnect(t->path(), "round trip");
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->server(), "test-server 1");
  EXPECT_NE(client->session(), 0u);
  EXPECT_EQ(client->key().size(), kKeyBytes);

  absl::StatusOr<SessionInfo> info = t->server->Session(client->session());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->peer.pid, ::getpid());
  EXPECT_EQ(info->peer.uid, ::getuid());
  EXPECT_EQ(info->name, "round trip");

  // A region that starts off a page boundary inside the memfd.
  auto m = MakeSealedMemfd(3 * 4096);
  ASSERT_TRUE(m.ok()) << m.status();
  for (size_t i = 0; i < m->size; ++i) m->bytes[i] = test::PeerByte(0, i);
  const Register r = HostRegion(*m, 100, 2 * 4096, /*writable=*/true);
  absl::StatusOr<uint32_t> rkey = client->Register(r, m->fd.get());
  ASSERT_TRUE(rkey.ok()) << rkey.status();
  EXPECT_NE(*rkey, 0u);
  EXPECT_EQ(registered.load(), 1);
  EXPECT_EQ(t->server->stats().regions, 1u);
  EXPECT_EQ(t->server->stats().bytes, r.size);

  auto region = t->server->Resolve(client->session(), client->key(), *rkey, r.address + 10, 1000,
                                   /*need_write=*/true);
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ((*region)->address(), r.address);
  EXPECT_EQ((*region)->size(), r.size);
  EXPECT_FALSE((*region)->gpu());
  ASSERT_NE((*region)->host(), nullptr);
  EXPECT_EQ(std::memcmp((*region)->host(), m->bytes + 100, r.size), 0);  // the client's bytes
  std::memset((*region)->host() + 5, 0xAB, 64);  // the server writes, the client sees it
  EXPECT_EQ(m->bytes[105], 0xAB);
  EXPECT_EQ(m->bytes[168], 0xAB);
  EXPECT_EQ(m->bytes[169], test::PeerByte(0, 169));

  // Deregistered: gone from the table, still mapped for the reference held here.
  ASSERT_TRUE(client->Deregister(*rkey).ok());
  EXPECT_EQ(t->server->stats().regions, 0u);
  EXPECT_EQ(t->server->stats().bytes, 0u);
  auto gone = t->server->Resolve(client->session(), client->key(), *rkey, r.address, 1, false);
  EXPECT_TRUE(absl::IsInvalidArgument(gone.status())) << gone.status();
  EXPECT_THAT(Msg(gone.status()), HasSubstr("is not registered"));
  EXPECT_EQ(static_cast<uint8_t>((*region)->host()[5]), 0xAB);
  absl::Status again = client->Deregister(*rkey);
  EXPECT_TRUE(absl::IsNotFound(again)) << again;
  EXPECT_TRUE(client->status().ok());  // an error reply leaves the connection open
}

TEST(HandoffServerTest, ResolveRefusesWrongKeyRkeyRangeAndWrites) {
  auto t = StartTestServer({});
  ASSERT_TRUE(t.ok()) << t.status();
  auto client = MustConnect(t->path(), "resolve");
  ASSERT_NE(client, nullptr);
  auto m = MakeSealedMemfd(8192);
  ASSERT_TRUE(m.ok());
  const Register ro = HostRegion(*m, 0, 8192, /*writable=*/false);
  absl::StatusOr<uint32_t> rkey = client->Register(ro, m->fd.get());
  ASSERT_TRUE(rkey.ok()) << rkey.status();
  const uint64_t s = client->session();
  const std::string key = client->key();

  EXPECT_TRUE(t->server->Resolve(s, key, *rkey, ro.address, 8192, false).ok());
  std::string wrong = key;
  wrong[15] ^= 1;
  auto bad_key = t->server->Resolve(s, wrong, *rkey, ro.address, 1, false);
  auto bad_session = t->server->Resolve(s + 1, key, *rkey, ro.address, 1, false);
  auto short_key = t->server->Resolve(s, key.substr(0, 8), *rkey, ro.address, 1, false);
  for (const auto* r : {&bad_key, &bad_session, &short_key}) {
    EXPECT_TRUE(absl::IsPermissionDenied(r->status())) << r->status();
  }
  EXPECT_EQ(bad_key.status().message(), bad_session.status().message());  // nothing to learn

  auto bad_rkey = t->server->Resolve(s, key, *rkey ^ 0x5A5A, ro.address, 1, false);
  EXPECT_TRUE(absl::IsInvalidArgument(bad_rkey.status()));
  EXPECT_THAT(Msg(bad_rkey.status()), HasSubstr("is not registered"));
  for (auto [addr, len] : {std::pair<uint64_t, uint64_t>{ro.address - 1, 1},
                           {ro.address, 8193},
                           {ro.address + 8192, 1},
                           {ro.address + 100, UINT64_MAX - 50},
                           {UINT64_MAX, 2}}) {
    auto out = t->server->Resolve(s, key, *rkey, addr, len, false);
    EXPECT_TRUE(absl::IsInvalidArgument(out.status())) << addr << "+" << len;
    EXPECT_THAT(Msg(out.status()), HasSubstr("lies outside region"));
  }
  auto write = t->server->Resolve(s, key, *rkey, ro.address, 8, /*need_write=*/true);
  EXPECT_TRUE(absl::IsInvalidArgument(write.status()));
  EXPECT_THAT(Msg(write.status()), HasSubstr("read-only"));
  // The server mapped it read-only, too.
  auto region = t->server->Resolve(s, key, *rkey, ro.address, 8, false);
  ASSERT_TRUE(region.ok());
  EXPECT_FALSE((*region)->writable());
}

TEST(HandoffServerTest, LimitsAreNamedInTheirErrors) {
  HandoffServerOptions o;
  o.max_regions_per_session = 2;
  o.max_bytes_per_session = 3 * 4096;
  auto t = StartTestServer(std::move(o));
  ASSERT_TRUE(t.ok()) << t.status();
  auto client = MustConnect(t->path(), "limits");
  ASSERT_NE(client, nullptr);
  auto m = MakeSealedMemfd(4 * 4096);
  ASSERT_TRUE(m.ok());
  auto a = client->Register(HostRegion(*m, 0, 2 * 4096, true), m->fd.get());
  ASSERT_TRUE(a.ok()) << a.status();
  auto bytes = client->Register(HostRegion(*m, 0, 2 * 4096, true), m->fd.get());
  EXPECT_TRUE(absl::IsResourceExhausted(bytes.status())) << bytes.status();
  EXPECT_THAT(Msg(bytes.status()), HasSubstr("max_bytes_per_session"));
  auto b = client->Register(HostRegion(*m, 0, 4096, true), m->fd.get());
  ASSERT_TRUE(b.ok()) << b.status();
  auto regions = client->Register(HostRegion(*m, 0, 1, true), m->fd.get());
  EXPECT_TRUE(absl::IsResourceExhausted(regions.status())) << regions.status();
  EXPECT_THAT(Msg(regions.status()), HasSubstr("max_regions_per_session"));
  EXPECT_NE(*a, *b);
  // Deregistering makes room again; the limits are per session.
  ASSERT_TRUE(client->Deregister(*a).ok());
  EXPECT_TRUE(client->Register(HostRegion(*m, 0, 2 * 4096, true), m->fd.get()).ok());
  auto other = MustConnect(t->path(), "other");
  ASSERT_NE(other, nullptr);
  EXPECT_TRUE(other->Register(HostRegion(*m, 0, 3 * 4096, true), m->fd.get()).ok());
  EXPECT_EQ(t->server->stats().regions, 3u);
  EXPECT_GE(t->server->stats().refused, 2u);
}

TEST(HandoffServerTest, AReserveAboveTheDescriptorLimitIsRefusedAtStart) {
  HandoffServerOptions o;
  o.fd_reserve = 1u << 30;  // more than any RLIMIT_NOFILE
  o.names.fd_reserve = "--fd-reserve";
  auto t = StartTestServer(std::move(o));
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << t.status();
  EXPECT_THAT(Msg(t.status()), HasSubstr("--fd-reserve 1073741824 leaves no descriptor"));
}

// Each region is a mapping of the server: all sessions together are held to a limit (by
// default half of vm.max_map_count), whoever holds them.
TEST(HandoffServerTest, RegionsOfAllSessionsAreCapped) {
  HandoffServerOptions o;
  o.max_regions = 3;
  auto t = StartTestServer(std::move(o));
  ASSERT_TRUE(t.ok()) << t.status();
  auto a = MustConnect(t->path(), "a");
  auto b = MustConnect(t->path(), "b");
  ASSERT_TRUE(a != nullptr && b != nullptr);
  auto m = MakeSealedMemfd(4096);
  ASSERT_TRUE(m.ok());
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(a->Register(HostRegion(*m, 0, 4096, true), m->fd.get()).ok());
  }
  auto third = b->Register(HostRegion(*m, 0, 4096, true), m->fd.get());
  ASSERT_TRUE(third.ok()) << third.status();
  auto fourth = b->Register(HostRegion(*m, 0, 4096, true), m->fd.get());
  EXPECT_TRUE(absl::IsResourceExhausted(fourth.status())) << fourth.status();
  EXPECT_THAT(Msg(fourth.status()), HasSubstr("maps 3 regions of all its clients"));
  ASSERT_TRUE(b->Deregister(*third).ok());
  EXPECT_TRUE(a->Register(HostRegion(*m, 0, 4096, true), m->fd.get()).ok());
}

TEST(HandoffServerTest, RkeysAreUniqueWithinASession) {
  auto t = StartTestServer({});
  ASSERT_TRUE(t.ok()) << t.status();
  auto client = MustConnect(t->path(), "rkeys");
  ASSERT_NE(client, nullptr);
  auto m = MakeSealedMemfd(4096);
  ASSERT_TRUE(m.ok());
  std::set<uint32_t> seen;
  for (int i = 0; i < 200; ++i) {
    auto rkey = client->Register(HostRegion(*m, 0, 4096, false), m->fd.get());
    ASSERT_TRUE(rkey.ok()) << rkey.status();
    EXPECT_NE(*rkey, 0u);
    EXPECT_TRUE(seen.insert(*rkey).second) << "rkey " << *rkey << " given twice";
  }
  EXPECT_EQ(t->server->stats().regions, 200u);
}

TEST(HandoffServerTest, CallbacksAnswerForTheServer) {
  absl::Mutex mu;
  std::vector<uint64_t> ended;
  ScopedFd channel;
  HandoffServerOptions o;
  o.admit = [](const PeerCredentials& p) { return absl::OkStatus(); };
  o.on_register = [](const SessionInfo&, const std::shared_ptr<ImportedRegion>& r) {
    if (r->size() == 4096) return absl::OkStatus();
    return absl::FailedPreconditionError("the NIC refused this region");
  };
  o.on_channel = [&](const SessionInfo&, ScopedFd fd) {
    absl::MutexLock lock(&mu);
    channel = std::move(fd);
    return absl::OkStatus();
  };
  o.on_session_end = [&](const SessionInfo& s) {
    absl::MutexLock lock(&mu);
    ended.push_back(s.id);
  };
  auto t = StartTestServer(std::move(o));
  ASSERT_TRUE(t.ok()) << t.status();
  auto client = MustConnect(t->path(), "callbacks");
  ASSERT_NE(client, nullptr);
  auto m = MakeSealedMemfd(8192);
  ASSERT_TRUE(m.ok());
  auto refused = client->Register(HostRegion(*m, 0, 8192, true), m->fd.get());
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(Msg(refused.status()), HasSubstr("the NIC refused"));
  EXPECT_EQ(t->server->stats().regions, 0u);
  EXPECT_TRUE(client->Register(HostRegion(*m, 0, 4096, true), m->fd.get()).ok());

  // OPEN_CHANNEL: the server makes the pair, keeps one end (the callback's) and hands the other
  // back; bytes cross between them, and the two ends are separate open files.
  absl::StatusOr<ScopedFd> mine = client->OpenChannel();
  ASSERT_TRUE(mine.ok()) << mine.status();
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(channel.valid());
    ASSERT_EQ(::fcntl(channel.get(), F_SETFL, ::fcntl(channel.get(), F_GETFL) | O_NONBLOCK), 0);
    ASSERT_EQ(::write(channel.get(), "hi", 2), 2);
  }
  EXPECT_EQ(::fcntl(mine->get(), F_GETFL) & O_NONBLOCK, 0) << "the server's flags reached ours";
  char buf[2];
  ASSERT_EQ(::read(mine->get(), buf, 2), 2);
  EXPECT_EQ(std::string(buf, 2), "hi");

  const uint64_t id = client->session();
  client.reset();
  ASSERT_TRUE(integ::PollUntil(
      [&] {
        absl::MutexLock lock(&mu);
        return !ended.empty();
      },
      absl::Seconds(30)));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(ended, std::vector<uint64_t>{id});
  EXPECT_TRUE(absl::IsNotFound(t->server->Session(id).status()));
}

TEST(HandoffServerTest, OpenChannelWithoutACallbackIsUnimplemented) {
  auto t = StartTestServer({});
  ASSERT_TRUE(t.ok()) << t.status();
  auto client = MustConnect(t->path(), "no channel");
  ASSERT_NE(client, nullptr);
  absl::StatusOr<ScopedFd> s = client->OpenChannel();
  EXPECT_TRUE(absl::IsUnimplemented(s.status())) << s.status();
  EXPECT_THAT(Msg(s.status()), HasSubstr("not a channel"));
}

TEST(HandoffServerTest, StopEndsSessionsAndRemovesTheSocket) {
  auto t = StartTestServer({});
  ASSERT_TRUE(t.ok()) << t.status();
  const std::string path = t->path();
  auto client = MustConnect(path, "stopped");
  ASSERT_NE(client, nullptr);
  auto idle = test::RawPeer::Connect(path);  // connected, no HELLO yet
  ASSERT_TRUE(idle.ok());
  t->server->Stop();
  t->server->Stop();  // idempotent
  struct stat st {};
  EXPECT_NE(::lstat(path.c_str(), &st), 0);
  auto m = MakeSealedMemfd(4096);
  ASSERT_TRUE(m.ok());
  auto r = client->Register(HostRegion(*m, 0, 4096, true), m->fd.get());
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
  EXPECT_TRUE(absl::IsUnavailable(client->status()));
  EXPECT_TRUE(idle->ClosedByServer());
  EXPECT_EQ(t->server->stats().sessions, 0u);
}

TEST(HandoffServerTest, StartReplacesOnlyAStaleSocket) {
  auto t = StartTestServer({});
  ASSERT_TRUE(t.ok()) << t.status();
  HandoffServerOptions live;
  live.socket_path = t->path();
  auto second = HandoffServer::Start(live);
  EXPECT_TRUE(absl::IsAlreadyExists(second.status())) << second.status();

  // A socket file nobody listens on (a crashed server's) is replaced.
  const std::string stale = t->dir->File("stale.sock");
  {
    ScopedFd s(::socket(AF_UNIX, SOCK_SEQPACKET, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, stale.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  HandoffServerOptions o;
  o.socket_path = stale;
  o.socket_mode = 0600;
  auto replaced = HandoffServer::Start(o);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  struct stat st {};
  ASSERT_EQ(::stat(stale.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(MustConnect(stale, "after stale"), nullptr);

  const std::string file = t->dir->File("regular");
  std::ofstream(file) << "not a socket";
  o.socket_path = file;
  auto not_socket = HandoffServer::Start(o);
  EXPECT_TRUE(absl::IsFailedPrecondition(not_socket.status())) << not_socket.status();
  o.socket_path = t->dir->File("no/such/dir.sock");
  auto no_dir = HandoffServer::Start(o);
  EXPECT_FALSE(no_dir.ok());
  EXPECT_THAT(Msg(no_dir.status()), HasSubstr("no/such/dir.sock"));
}

TEST(HandoffClientTest, ConnectNamesThePathWhenNothingListens) {
  auto c = HandoffClient::Connect("/nonexistent/handoff.sock", "x", absl::Seconds(5));
  EXPECT_TRUE(absl::IsUnavailable(c.status())) << c.status();
  EXPECT_THAT(Msg(c.status()), HasSubstr("/nonexistent/handoff.sock"));
}

TEST(HandoffClientTest, RegisterChecksItsDescriptorLocally) {
  auto t = StartTestServer({});
  ASSERT_TRUE(t.ok()) << t.status();
  auto client = MustConnect(t->path(), "local checks");
  ASSERT_NE(client, nullptr);
  Register r;
  r.size = 4096;
  auto no_fd = client->Register(r, -1);
  EXPECT_TRUE(absl::IsInvalidArgument(no_fd.status()));
  EXPECT_THAT(Msg(no_fd.status()), HasSubstr("host-memfd region takes 1 descriptors"));
  EXPECT_TRUE(client->status().ok());
}


// RegisterChunks stages each chunk and then registers, under one hold of the connection: the
// server sees the chunks (here memfds, which the import refuses: an ERROR naming the driver's
// answer, not a staging error), and the session serves the next request in step.
TEST(HandoffClientTest, RegisterChunksStagesEachChunkThenRegisters) {
  std::atomic<int> registered{0};
  HandoffServerOptions o;
  o.on_register = [&](const SessionInfo&, const std::shared_ptr<ImportedRegion>&) {
    registered++;
    return absl::OkStatus();
  };
  auto t = StartTestServer(std::move(o));
  ASSERT_TRUE(t.ok()) << t.status();
  auto client = MustConnect(t->path(), "chunks");
  ASSERT_NE(client, nullptr);
  auto m = MakeSealedMemfd(4096);
  ASSERT_TRUE(m.ok()) << m.status();
  Register r;
  r.kind = MemoryKind::kGpuVmmChunks;
  r.address = 0x7f8000000000;
  r.size = 3 * 4096 - 200;
  r.offset = 100;
  r.allocation_size = 3 * 4096;
  r.gpu = "0000:b7:00.0";
  const std::vector<HandoffClient::Chunk> three(3, {m->fd.get(), 4096});
  absl::StatusOr<uint32_t> rkey = client->RegisterChunks(r, three);
  ASSERT_FALSE(rkey.ok());
  EXPECT_THAT(Msg(rkey.status()), Not(HasSubstr("staged")));
  EXPECT_EQ(registered.load(), 0);
  // Chunks that do not add up are the server's staging error.
  rkey = client->RegisterChunks(r, std::vector<HandoffClient::Chunk>(2, {m->fd.get(), 4096}));
  ASSERT_FALSE(rkey.ok());
  EXPECT_THAT(Msg(rkey.status()), HasSubstr("the 2 chunks staged hold 8192"));
  // Checked before anything is sent.
  EXPECT_THAT(Msg(client->RegisterChunks(r, {}).status()), HasSubstr("1..4096 chunks; 0 given"));
  EXPECT_THAT(Msg(client->RegisterChunks(r, {{-1, 4096}}).status()), HasSubstr("no descriptor"));
  Register host = HostRegion(*m, 0, 4096, true);
  EXPECT_THAT(Msg(client->RegisterChunks(host, three).status()), HasSubstr("not host-memfd"));
  // In step: a host region registers on the same session.
  absl::StatusOr<uint32_t> ok = client->Register(host, m->fd.get());
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(registered.load(), 1);
  EXPECT_TRUE(client->status().ok());
}

}  // namespace
}  // namespace gdr::handoff
