// gdragent's guards and its life with real processes: a uid its allowlist does not name is
// refused by name; the per-client limits of registered bytes and ops in flight hold; a client
// SIGKILLed in the middle of its ops loses its registrations while the agent and another client
// go on; an agent killed and started again serves a new connection (a library client of the
// killed one gets UNAVAILABLE, a new one is served); SIGTERM ends it with 0; `gdragent health`
// answers while its daemon is down (liveness), `gdrctl --agent info` does not (readiness); under
// systemd it says READY=1, pings the watchdog, and reloads its credentials on SIGHUP.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <span>

#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "tests/agent/agent_harness.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/notify_listener.h"

namespace gdr::agent::test {
namespace {

namespace v1 = gdrstore::v1;
using ::testing::HasSubstr;

constexpr char kSetpriv[] = "/usr/bin/setpriv";

bool CanSwitchUid(std::string* why) {
  if (::getuid() != 0) {
    *why = "running a client as uid 65534 needs root (the CI runs this suite as root)";
    return false;
  }
  if (::access(kSetpriv, X_OK) != 0) {
    *why = "no /usr/bin/setpriv (util-linux) to run a client as another uid";
    return false;
  }
  return true;
}

// Runs agent_peer ARGS as uid/gid 65534 with no supplementary groups.
absl::StatusOr<integ::ProcessResult> RunAsNobody(const std::vector<std::string>& args,
                                                 const std::string& dir) {
  std::vector<std::string> argv = {kSetpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                                   GDR_AGENT_PEER_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  return integ::RunProcess(argv, dir, "nobody", absl::Seconds(60));
}

std::unique_ptr<integ::DaemonProcess> StartDaemon(std::vector<std::string> args = {}) {
  if (args.empty()) args = {"--volume", "vol0=64MiB"};
  auto d = integ::DaemonProcess::Start(args);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *std::move(d) : nullptr;
}

bool Verified(const SharedMemory& m, size_t offset, const std::string& volume,
              uint64_t volume_offset, size_t n) {
  return !PatternMismatch(PatternSeed(volume), volume_offset,
                          std::span<const std::byte>(m.data() + offset, n))
              .has_value();
}

TEST(AgentLifecycleTest, RefusesAUidItsAllowlistDoesNotName) {
  std::string why;
  if (!CanSwitchUid(&why)) GTEST_SKIP() << why;
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto agent = AgentProcess::Start(daemon->address(), {});
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto refused = RunAsNobody({"hello", (*agent)->socket_path()}, (*agent)->dir()->path());
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->exit_code, 3) << refused->Describe();
  EXPECT_THAT(refused->out, HasSubstr("error PERMISSION_DENIED"));
  EXPECT_THAT(refused->out, HasSubstr("uid 65534"));

  // Named in --allow-uid, the same process is let in.
  auto open = AgentProcess::Start(daemon->address(), {"--allow-uid", "65534"});
  ASSERT_TRUE(open.ok()) << open.status();
  auto admitted = RunAsNobody({"hello", (*open)->socket_path()}, (*open)->dir()->path());
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_EQ(admitted->exit_code, 0) << admitted->Describe();
  EXPECT_THAT(admitted->out, HasSubstr("session "));
  // And by its gid.
  auto by_gid = AgentProcess::Start(daemon->address(), {"--allow-gid", "65534"});
  ASSERT_TRUE(by_gid.ok()) << by_gid.status();
  admitted = RunAsNobody({"hello", (*by_gid)->socket_path()}, (*by_gid)->dir()->path());
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_EQ(admitted->exit_code, 0) << admitted->Describe();
}

TEST(AgentLifecycleTest, RegisteredBytesPerClientAreCapped) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto agent = AgentProcess::Start(daemon->address(), {"--max-bytes-per-client", "1MiB"});
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto c = AgentClient::Connect((*agent)->socket_path(), "limits");
  ASSERT_TRUE(c.ok()) << c.status();
  auto big = SharedMemory::Create(768 << 10);
  auto more = SharedMemory::Create(512 << 10);
  ASSERT_TRUE(big.ok() && more.ok());
  auto first = c->Register(**big);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = c->Register(**more);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted) << second.status();
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("1048576"));  // the limit
  // What was refused was never registered upstream; what goes is withdrawn there too.
  ASSERT_TRUE(c->session->Deregister(*first).ok());
  second = c->Register(**more);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(integ::PollUntil(
      [&] {
        auto s = c->Stats();
        return s.ok() && s->agent().upstream_registrations() == 1 && s->agent().regions() == 1;
      },
      absl::Seconds(10)));
  auto got = c->Get("vol0", 0, c->Describe(**more, *second, 0, 4096));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(Verified(**more, 0, "vol0", 0, 4096));
}

TEST(AgentLifecycleTest, OpsInFlightPerClientAreCapped) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto agent = AgentProcess::Start(daemon->address(), {"--max-ops-per-client", "2"});
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto c = AgentClient::Connect((*agent)->socket_path(), "limits");
  ASSERT_TRUE(c.ok()) << c.status();
  auto mem = SharedMemory::Create(1 << 20);
  ASSERT_TRUE(mem.ok());
  auto rkey = c->Register(**mem);
  ASSERT_TRUE(rkey.ok()) << rkey.status();
  // A daemon that does not answer keeps the first two in flight for as long as it is stopped.
  ASSERT_TRUE(daemon->Stop().ok());
  grpc::ClientContext ctx;
  auto stream = c->stub->Stream(&ctx);
  v1::StreamRequest req;
  for (int i = 0; i < 3; ++i) {
    v1::StreamOp* op = req.add_ops();
    op->set_id(i);
    v1::WriteRequest* w = op->mutable_write();
    w->mutable_extent()->set_volume("vol0");
    w->mutable_extent()->set_offset(i * 65536);
    w->mutable_extent()->set_length(65536);
    *w->mutable_buffer() = c->Describe(**mem, *rkey, i * 65536, 65536);
  }
  ASSERT_TRUE(stream->Write(req));
  v1::StreamResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_EQ(resp.results_size(), 1);
  EXPECT_EQ(resp.results(0).id(), 2u);
  EXPECT_EQ(resp.results(0).code(), static_cast<int>(absl::StatusCode::kResourceExhausted));
  EXPECT_TRUE(resp.results(0).not_admitted());
  EXPECT_THAT(resp.results(0).message(), HasSubstr("--max-ops-per-client=2"));
  // Once the daemon answers, the two admitted ops complete.
  ASSERT_TRUE(daemon->Signal(SIGCONT).ok());
  ASSERT_TRUE(stream->WritesDone());
  int ok = 0;
  while (stream->Read(&resp)) {
    for (const v1::StreamResult& r : resp.results()) {
      EXPECT_EQ(r.code(), 0) << r.message();
      ok += r.code() == 0;
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(ok, 2);
  EXPECT_TRUE(Verified(**mem, 0, "vol0", 0, 2 * 65536));
}

TEST(AgentLifecycleTest, AClientKilledMidOpLosesItsRegistrationsAndOthersGoOn) {
  // Every get takes 20 ms on this volume: the peer has ops in flight whenever it is killed.
  auto daemon = StartDaemon({"--volume", "vol0=64MiB", "--volume", "slow=16MiB,latency_us=20000"});
  ASSERT_NE(daemon, nullptr);
  auto agent = AgentProcess::Start(daemon->address(), {});
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto mine = AgentClient::Connect((*agent)->socket_path(), "survivor");
  ASSERT_TRUE(mine.ok()) << mine.status();
  auto mem = SharedMemory::Create(1 << 20);
  ASSERT_TRUE(mem.ok());
  auto rkey = mine->Register(**mem);
  ASSERT_TRUE(rkey.ok()) << rkey.status();

  const std::string dir = (*agent)->dir()->path();
  auto peer = integ::ChildProcess::Spawn(
      {GDR_AGENT_PEER_BIN, "load", (*agent)->socket_path(), "slow"}, dir + "/peer.out",
      dir + "/peer.err");
  ASSERT_TRUE(peer.ok()) << peer.status();
  const pid_t peer_pid = (*peer)->pid();
  ASSERT_TRUE(integ::PollUntil(
      [&] {
        return integ::ReadFileOrEmpty(dir + "/peer.out").find("running") != std::string::npos ||
               !(*peer)->Running();
      },
      absl::Seconds(60)));
  ASSERT_THAT(integ::ReadFileOrEmpty(dir + "/peer.out"), HasSubstr("running"))
      << integ::ReadFileOrEmpty(dir + "/peer.err");
  auto before = mine->Stats();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->agent().regions(), 2u);
  EXPECT_EQ(before->agent().clients_size(), 2);

  ASSERT_TRUE((*peer)->Signal(SIGKILL).ok());
  ASSERT_TRUE((*peer)->Wait(absl::Seconds(10)).ok());
  // Its session ends, its ops finish upstream, and then nothing of it is left.
  v1::GetStatsResponse after;
  const bool gone = integ::PollUntil(
      [&] {
        auto s = mine->Stats();
        if (!s.ok()) return false;
        after = *std::move(s);
        const v1::AgentStats& a = after.agent();
        return a.sessions() == 1 && a.regions() == 1 && a.registered_bytes() == (1u << 20) &&
               a.upstream_registrations() == 1 && a.clients_size() == 1 &&
               after.admission().inflight_ops() == 0;
      },
      absl::Seconds(30));
  EXPECT_TRUE(gone) << after.DebugString();
  if (after.agent().clients_size() == 1) {
    EXPECT_NE(after.agent().clients(0).pid(), static_cast<uint32_t>(peer_pid));
  }
  // The agent and the other client go on.
  EXPECT_TRUE((*agent)->Running());
  auto got = mine->Get("vol0", 4242, mine->Describe(**mem, *rkey, 0, 1 << 20));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(Verified(**mem, 0, "vol0", 4242, 1 << 20));
}

TEST(AgentLifecycleTest, ARestartedAgentServesNewConnections) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto agent = AgentProcess::Start(daemon->address(), {});
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto c = AgentClient::Connect((*agent)->socket_path(), "before");
  ASSERT_TRUE(c.ok()) << c.status();
  auto mem = SharedMemory::Create(1 << 20);
  ASSERT_TRUE(mem.ok());
  auto rkey = c->Register(**mem);
  ASSERT_TRUE(rkey.ok()) << rkey.status();
  ASSERT_TRUE(c->Get("vol0", 0, c->Describe(**mem, *rkey, 0, 4096)).ok());

  std::shared_ptr<integ::TempDir> dir = (*agent)->dir();
  ASSERT_TRUE((*agent)->Signal(SIGKILL).ok());
  ASSERT_TRUE((*agent)->Wait(absl::Seconds(10)).ok());
  auto lost = c->Get("vol0", 0, c->Describe(**mem, *rkey, 0, 4096));
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();

  // Same socket path, new process: the old socket file is replaced.
  auto again = AgentProcess::Start(daemon->address(), {}, dir);
  ASSERT_TRUE(again.ok()) << again.status();
  auto c2 = AgentClient::Connect((*again)->socket_path(), "after");
  ASSERT_TRUE(c2.ok()) << c2.status();
  auto rkey2 = c2->Register(**mem);
  ASSERT_TRUE(rkey2.ok()) << rkey2.status();
  auto got = c2->Get("vol0", 99, c2->Describe(**mem, *rkey2, 0, 1 << 20));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(Verified(**mem, 0, "vol0", 99, 1 << 20));

  // SIGTERM: the agent stops taking ops, and with none in flight exits 0 at once.
  ASSERT_TRUE((*again)->Signal(SIGTERM).ok());
  auto status = (*again)->Wait(absl::Seconds(20));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << integ::DescribeWaitStatus(*status) << ": " << (*again)->Stderr();
  EXPECT_FALSE(c2->Get("vol0", 0, c2->Describe(**mem, *rkey2, 0, 4096)).ok());
}

TEST(AgentLifecycleTest, ALibraryClientOfAKilledAgentGetsUnavailableAndReconnectsAfterItsRestart) {
  // What a caller of the library sees: every op and Stream ends UNAVAILABLE naming the agent,
  // nothing hangs; a new Client (a new session, its memory handed over again) serves once the
  // agent is back.
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto agent = AgentProcess::Start(daemon->address(), {});
  ASSERT_TRUE(agent.ok()) << agent.status();
  gdrstore::ClientOptions o;
  o.agent = (*agent)->socket_path();
  o.rpc_timeout = std::chrono::milliseconds(10000);
  auto c = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto buf = (*c)->AllocateBuffer(1 << 20);
  ASSERT_TRUE(buf.ok()) << buf.status();
  ASSERT_TRUE((*c)->Write({"vol0", 0, 1 << 20}, **buf).ok());
  auto stream = (*c)->OpenStream();
  ASSERT_TRUE(stream.ok()) << stream.status();

  std::shared_ptr<integ::TempDir> dir = (*agent)->dir();
  ASSERT_TRUE((*agent)->Signal(SIGKILL).ok());
  ASSERT_TRUE((*agent)->Wait(absl::Seconds(10)).ok());
  auto lost = (*c)->Write({"vol0", 0, 4096}, **buf);
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  std::promise<absl::StatusOr<gdrstore::OpResult>> answered;
  (*stream)->Submit(gdrstore::OpKind::kRead, {"vol0", 0, 4096}, **buf, 0,
                    [&answered](absl::StatusOr<gdrstore::OpResult> r) {
                      answered.set_value(std::move(r));
                    });
  auto future = answered.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(15)), std::future_status::ready);
  EXPECT_FALSE(future.get().ok());
  (void)(*stream)->Close();
  // Nobody at the socket: Connect says so at once.
  auto refused = gdrstore::Client::Connect(o);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();

  auto again = AgentProcess::Start(daemon->address(), {}, dir);
  ASSERT_TRUE(again.ok()) << again.status();
  auto c2 = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c2.ok()) << c2.status();
  auto buf2 = (*c2)->AllocateBuffer(1 << 20);
  ASSERT_TRUE(buf2.ok()) << buf2.status();
  auto got = (*c2)->Write({"vol0", 777, 1 << 20}, **buf2);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(PatternMismatch(PatternSeed("vol0"), 777,
                               std::span<const std::byte>((*buf2)->data(), 1 << 20))
                   .has_value());
  // The old client's ops stay refused, never sent on someone else's session.
  EXPECT_FALSE((*c)->Write({"vol0", 0, 4096}, **buf).ok());
}

TEST(AgentLifecycleTest, StartsWithoutItsDaemonAndServesOnceItIsUp) {
  // The daemon of a tcp agent may come later (or restart): ops fail UNAVAILABLE meanwhile and
  // go through once it answers.
  // The agent's Streams stay open on it: a short drain lets it go at once.
  auto daemon = StartDaemon({"--volume", "vol0=64MiB", "--drain-timeout-ms", "200"});
  ASSERT_NE(daemon, nullptr);
  const std::string address = daemon->address();
  auto agent = AgentProcess::Start(address, {});
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto c = AgentClient::Connect((*agent)->socket_path(), "patient");
  ASSERT_TRUE(c.ok()) << c.status();
  auto mem = SharedMemory::Create(1 << 20);
  ASSERT_TRUE(mem.ok());
  auto rkey = c->Register(**mem);
  ASSERT_TRUE(rkey.ok()) << rkey.status();
  ASSERT_TRUE(c->Get("vol0", 0, c->Describe(**mem, *rkey, 0, 4096)).ok());
  daemon.reset();  // SIGTERM: it drains and exits
  auto down = c->Get("vol0", 0, c->Describe(**mem, *rkey, 0, 4096));
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  EXPECT_THAT(std::string(down.status().message()),
              HasSubstr(absl::StrCat("gdragent: daemon ", address)));
  EXPECT_TRUE((*agent)->Running());

  // A daemon back on the same address: the agent's streams to it are opened again.
  integ::DaemonStart how;
  how.listen = address;
  auto back = integ::DaemonProcess::Start({"--volume", "vol0=64MiB"}, how);
  ASSERT_TRUE(back.ok()) << back.status();
  absl::Status last;
  EXPECT_TRUE(integ::PollUntil(
      [&] {
        last = c->Get("vol0", 555, c->Describe(**mem, *rkey, 0, 1 << 20)).status();
        return last.ok();
      },
      absl::Seconds(30), absl::Milliseconds(100)))
      << last;
  EXPECT_TRUE(Verified(**mem, 0, "vol0", 555, 1 << 20));
}

TEST(AgentLifecycleTest, HealthAsksTheAgentAloneReadinessFollowsItsDaemon) {
  // Kubernetes' probes: liveness (`gdragent health`) asks the agent itself, so storage that is
  // down never gets the agent restarted under running jobs; readiness (`gdrctl --agent SOCK
  // info`) asks its daemons.
  auto daemon = StartDaemon({"--volume", "vol0=64MiB", "--drain-timeout-ms", "200"});
  ASSERT_NE(daemon, nullptr);
  auto agent = AgentProcess::Start(daemon->address(), {});
  ASSERT_TRUE(agent.ok()) << agent.status();
  const std::string socket = (*agent)->socket_path();
  int runs = 0;
  auto probe = [&](std::vector<std::string> argv) {
    auto r = integ::RunProcess(argv, (*agent)->dir()->path(), absl::StrCat("probe", runs++),
                               absl::Seconds(60));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : integ::ProcessResult{};
  };
  const std::vector<std::string> health = {AgentBinary(), "health", "--socket", socket};
  const std::vector<std::string> ready = {GDR_GDRCTL_BIN, "--agent", socket, "info"};
  integ::ProcessResult h = probe(health);
  EXPECT_EQ(h.exit_code, 0) << h.Describe();
  EXPECT_THAT(h.out, HasSubstr(absl::StrCat(" at ", socket, " answers")));
  EXPECT_EQ(probe(ready).exit_code, 0);

  daemon.reset();  // storage gone: not ready, still alive
  integ::ProcessResult r = probe(ready);
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  h = probe(health);
  EXPECT_EQ(h.exit_code, 0) << h.Describe();

  // The agent gone: the probe fails, naming the socket.
  ASSERT_TRUE((*agent)->Signal(SIGTERM).ok());
  ASSERT_TRUE((*agent)->Wait(absl::Seconds(30)).ok());
  h = probe(health);
  EXPECT_EQ(h.exit_code, 1) << h.Describe();
  EXPECT_THAT(h.err, HasSubstr(absl::StrCat("gdragent health: ", socket, ": ")));
}

TEST(AgentLifecycleTest, TellsSystemdReadyWatchdogAndStopping) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto dir = integ::TempDir::Create("gdragent-notify");
  ASSERT_TRUE(dir.ok()) << dir.status();
  std::shared_ptr<integ::TempDir> shared = *std::move(dir);
  ASSERT_EQ(::chmod(shared->path().c_str(), 0755), 0);
  const std::string socket = shared->File("agent.sock");
  // At READY=1 the socket must already take sessions.
  bool served_at_ready = false;
  auto listener = integ::NotifyListener::Bind(
      shared->File("notify"), [&](const integ::NotifyMessage& m) {
        if (!m.Has("READY=1")) return;
        served_at_ready =
            handoff::HandoffClient::Connect(socket, "at-ready", absl::Seconds(5)).ok();
      });
  ASSERT_TRUE(listener.ok()) << listener.status();
  auto agent = AgentProcess::Start(
      daemon->address(), {}, shared, absl::Seconds(30),
      {"NOTIFY_SOCKET=" + (*listener)->path(), "WATCHDOG_USEC=400000"});
  ASSERT_TRUE(agent.ok()) << agent.status();
  const int ready = (*listener)->WaitFor("READY=1", 0, absl::Seconds(30));
  ASSERT_GE(ready, 0);
  EXPECT_TRUE(served_at_ready);
  EXPECT_THAT((*listener)->messages()[ready].Get("STATUS"),
              HasSubstr(absl::StrCat("agent -> ", daemon->address(), " over tcp")));
  // The watchdog is pinged (every half of WATCHDOG_USEC) while the gRPC server answers, each
  // ping with a fresh STATUS line.
  const int ping = (*listener)->WaitFor("WATCHDOG=1", ready, absl::Seconds(30));
  ASSERT_GE(ping, 0);
  EXPECT_THAT((*listener)->messages()[ping].Get("STATUS"), HasSubstr("ops in flight"));
  // SIGHUP reads the agent's credentials again (RELOADING=1, then READY=1), and the agent
  // serves on until SIGTERM (taken after it: sigwait takes pending signals lowest number first).
  ASSERT_TRUE((*agent)->Signal(SIGHUP).ok());
  ASSERT_TRUE((*agent)->Signal(SIGTERM).ok());
  const int stopping = (*listener)->WaitFor("STOPPING=1", ready, absl::Seconds(30));
  ASSERT_GE(stopping, 0);
  const int reloading = (*listener)->WaitFor("RELOADING=1", ready, absl::Seconds(30));
  EXPECT_GE(reloading, 0);
  EXPECT_LT(reloading, stopping);
  EXPECT_THAT((*agent)->Stderr(), HasSubstr("SIGHUP: credentials reloaded"));
  auto status = (*agent)->Wait(absl::Seconds(20));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)
      << integ::DescribeWaitStatus(*status);
}

}  // namespace
}  // namespace gdr::agent::test
