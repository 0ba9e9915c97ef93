// gdragent in front of more than one daemon: several named with --daemon (each op goes to the
// daemon serving its volume, one that comes up late is found, a volume two serve is refused),
// every address of a --daemon-service name (its own hosts file in a mount namespace), and a
// cluster, from a members file and from a real etcd, whose ops are striped over its
// members. Every byte is checked; real daemons, agent and etcd processes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <span>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "gdrstore/cluster.h"
#include "tests/agent/agent_harness.h"
#include "tests/common/etcd_server.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"

namespace gdr::agent::test {
namespace {

namespace v1 = gdrstore::v1;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kMiB = 1 << 20;

std::unique_ptr<integ::DaemonProcess> StartDaemon(const std::vector<std::string>& args,
                                                  const integ::DaemonStart& how = {}) {
  auto d = integ::DaemonProcess::Start(args, how);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *std::move(d) : nullptr;
}

// The daemon's own pattern of `volume` in [offset, +n) of `m`.
bool DaemonPattern(const SharedMemory& m, const std::string& volume, uint64_t offset, size_t n) {
  return !PatternMismatch(PatternSeed(volume), offset, std::span<const std::byte>(m.data(), n))
              .has_value();
}

// Bytes the daemon has moved, both ways.
uint64_t DaemonBytes(const integ::DaemonProcess& d) {
  gdrstore::ClientOptions o;
  o.daemon_address = d.address();
  auto c = gdrstore::Client::Connect(o);
  if (!c.ok()) return 0;
  auto s = integ::GetStats(**c);
  if (!s.ok()) return 0;
  return s->total().write_bytes() + s->total().read_bytes();
}

// A put of `salt`'s pattern into [offset, +n) of `volume` through the agent, then a get of it
// into cleared memory, verified: the round trip a cluster volume is checked by (its logical
// bytes are not any one daemon's pattern).
absl::Status RoundTrip(AgentClient& c, SharedMemory& mem, uint32_t rkey,
                       const std::string& volume, uint64_t offset, size_t n, uint64_t salt) {
  const uint64_t seed = PatternSeed(volume, salt);
  PatternFill(seed, offset, std::span(mem.data(), n));
  if (auto put = c.Put(volume, offset, c.Describe(mem, rkey, 0, n)); !put.ok()) {
    return put.status();
  }
  std::memset(mem.data(), 0xEE, n);
  if (auto got = c.Get(volume, offset, c.Describe(mem, rkey, 0, n)); !got.ok()) {
    return got.status();
  }
  if (auto bad = PatternMismatch(seed, offset, std::span<const std::byte>(mem.data(), n))) {
    return absl::DataLossError(absl::StrCat("byte ", *bad, " differs after the round trip"));
  }
  return absl::OkStatus();
}

// Gets [offset, +n) of `volume` into `mem` until the answer's code is `want` (the agent has
// learnt of a daemon, or of one gone), within 20 s; the last answer.
absl::Status GetUntil(AgentClient& c, const SharedMemory& mem, uint32_t rkey,
                      const std::string& volume, uint64_t offset, size_t n,
                      absl::StatusCode want) {
  absl::Status last;
  integ::PollUntil(
      [&] {
        last = c.Get(volume, offset, c.Describe(mem, rkey, 0, n)).status();
        return last.code() == want;
      },
      absl::Seconds(20), absl::Milliseconds(100));
  return last;
}

TEST(AgentUpstreamsTest, SeveralDaemonsEachServeTheirVolumesThroughOneAgent) {
  auto a = StartDaemon({"--volume", "alpha=16MiB", "--volume", "both=1MiB"});
  auto b = StartDaemon({"--volume", "beta=16MiB", "--volume", "both=1MiB"});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto agent = AgentProcess::Start(a->address(), {"--daemon", b->address()});
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto c = AgentClient::Connect((*agent)->socket_path(), "two-daemons");
  ASSERT_TRUE(c.ok()) << c.status();
  auto mem = SharedMemory::Create(2 * kMiB);
  ASSERT_TRUE(mem.ok());
  auto rkey = c->Register(**mem);
  ASSERT_TRUE(rkey.ok()) << rkey.status();

  // Each volume's bytes are its own daemon's: the pattern proves which one answered.
  const uint64_t a_before = DaemonBytes(*a), b_before = DaemonBytes(*b);
  ASSERT_TRUE(c->Get("alpha", 4096, c->Describe(**mem, *rkey, 0, kMiB)).ok());
  EXPECT_TRUE(DaemonPattern(**mem, "alpha", 4096, kMiB));
  ASSERT_TRUE(c->Get("beta", 8192, c->Describe(**mem, *rkey, 0, kMiB)).ok());
  EXPECT_TRUE(DaemonPattern(**mem, "beta", 8192, kMiB));
  absl::Status rt = RoundTrip(*c, **mem, *rkey, "beta", 3 * kMiB + 5, 2 * kMiB, 7);
  EXPECT_TRUE(rt.ok()) << rt;
  EXPECT_EQ(DaemonBytes(*a) - a_before, kMiB);
  EXPECT_EQ(DaemonBytes(*b) - b_before, kMiB + 4 * kMiB);

  // A volume nobody serves: NOT_FOUND naming what each daemon serves.
  auto none = c->Get("gamma", 0, c->Describe(**mem, *rkey, 0, 4096));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound) << none.status();
  EXPECT_THAT(std::string(none.status().message()),
              AllOf(HasSubstr("'gamma'"), HasSubstr(absl::StrCat(a->address(), " serves")),
                    HasSubstr("beta")));
  // Served twice: refused, not guessed.
  auto twice = c->Get("both", 0, c->Describe(**mem, *rkey, 0, 4096));
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kFailedPrecondition) << twice.status();
  EXPECT_THAT(std::string(twice.status().message()),
              AllOf(HasSubstr(a->address()), HasSubstr(b->address())));

  // GetInfo names the path to each daemon and every volume.
  auto info = c->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->transports_size(), 1);
  const std::string& detail = info->transports(0).detail();
  EXPECT_THAT(detail, HasSubstr(absl::StrCat("agent -> ", a->address(), " over tcp")));
  EXPECT_THAT(detail, HasSubstr(absl::StrCat("agent -> ", b->address(), " over tcp")));
  EXPECT_EQ(info->volumes_size(), 4);
  auto stats = c->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->agent().upstream_registrations(), 2u);  // the region, once per daemon
}

TEST(AgentUpstreamsTest, ADaemonThatComesUpLaterIsFoundByTheFirstOpOnItsVolume) {
  auto a = StartDaemon({"--volume", "alpha=4MiB"});
  ASSERT_NE(a, nullptr);
  auto port = integ::BoundPort::Reserve();
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string late = port->address();
  port->Release();  // refused until the daemon takes it
  auto agent = AgentProcess::Start(a->address(), {"--daemon", late});
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto c = AgentClient::Connect((*agent)->socket_path(), "late");
  ASSERT_TRUE(c.ok()) << c.status();
  auto mem = SharedMemory::Create(kMiB);
  ASSERT_TRUE(mem.ok());
  auto rkey = c->Register(**mem);
  ASSERT_TRUE(rkey.ok()) << rkey.status();

  auto early = c->Get("beta", 0, c->Describe(**mem, *rkey, 0, 4096));
  EXPECT_EQ(early.status().code(), absl::StatusCode::kNotFound) << early.status();
  EXPECT_THAT(std::string(early.status().message()),
              HasSubstr(absl::StrCat(late, " serves nothing known (unreachable")));
  // GetInfo still answers with the daemon that is up, and says which is not.
  auto info = c->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->transports(0).detail(), HasSubstr("unreachable"));

  integ::DaemonStart how;
  how.listen = late;
  // Stopped while the agent still holds Streams to it: a short drain.
  auto b = StartDaemon({"--volume", "beta=4MiB", "--drain-timeout-ms", "200"}, how);
  ASSERT_NE(b, nullptr);
  absl::Status last = GetUntil(*c, **mem, *rkey, "beta", 12345, kMiB, absl::StatusCode::kOk);
  EXPECT_TRUE(last.ok()) << last;
  EXPECT_TRUE(DaemonPattern(**mem, "beta", 12345, kMiB));
}

// The agent's command line run in a mount namespace of its own whose /etc/hosts is `hosts`
// (bind-mounted): a name resolving to the addresses the test writes there, changed under it.
std::vector<std::string> InOwnHosts(const std::string& hosts, std::vector<std::string> argv) {
  std::vector<std::string> out = {"/usr/bin/unshare"};
  if (::geteuid() != 0) out.insert(out.end(), {"--user", "--map-root-user"});
  out.insert(out.end(), {"--mount", "--", "/bin/sh", "-c",
                         "mount --bind \"$0\" /etc/hosts && exec \"$@\"", hosts});
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

// Rewritten in place: the bind mount holds the file, not its name.
void WriteHosts(const std::string& path, const std::string& base,
                const std::vector<std::string>& addresses) {
  std::ofstream f(path, std::ios::trunc);
  f << base;
  for (const std::string& a : addresses) f << a << " gdr-storage.k4.test\n";
}

TEST(AgentUpstreamsTest, EveryAddressOfADaemonServiceIsReachedAndResolvedAgain) {
  auto dir = integ::TempDir::Create("agent-dns");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string hosts = (*dir)->File("hosts");
  std::stringstream base;
  base << std::ifstream("/etc/hosts").rdbuf();
  WriteHosts(hosts, base.str() + "\n", {});
  auto probe = integ::ChildProcess::Spawn(InOwnHosts(hosts, {"/bin/true"}), (*dir)->File("p.out"),
                                          (*dir)->File("p.err"));
  ASSERT_TRUE(probe.ok()) << probe.status();
  auto probed = (*probe)->Wait(absl::Seconds(30));
  ASSERT_TRUE(probed.ok()) << probed.status();
  if (!WIFEXITED(*probed) || WEXITSTATUS(*probed) != 0) {
    GTEST_SKIP() << "no mount namespace with its own /etc/hosts here (unshare --mount: "
                 << integ::DescribeWaitStatus(*probed) << ")";
  }

  // A headless Service's daemons: one port, an address each.
  auto port = integ::BoundPort::Reserve();
  ASSERT_TRUE(port.ok()) << port.status();
  const uint16_t p = port->port();
  port->Release();
  integ::DaemonStart how_a, how_b;
  how_a.listen = absl::StrCat("127.0.0.1:", p);
  how_b.listen = absl::StrCat("127.0.0.2:", p);
  how_b.health_check = false;  // the check asks 127.0.0.1
  auto a = StartDaemon({"--volume", "alpha=4MiB", "--drain-timeout-ms", "200"}, how_a);
  ASSERT_NE(a, nullptr);
  WriteHosts(hosts, base.str() + "\n", {"127.0.0.1"});

  const std::string sock = (*dir)->File("agent.sock");
  auto agent = integ::ChildProcess::Spawn(
      InOwnHosts(hosts, {GDR_GDRAGENT_BIN, "--socket", sock, "--daemon-service",
                         absl::StrCat("gdr-storage.k4.test:", p), "--resolve-interval-ms",
                         "100"}),
      (*dir)->File("agent.out"), (*dir)->File("agent.err"));
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto agent_log = [&] {
    std::stringstream e;
    e << std::ifstream((*dir)->File("agent.err")).rdbuf();
    return e.str();
  };
  absl::StatusOr<AgentClient> c = absl::UnavailableError("not tried");
  ASSERT_TRUE(integ::PollUntil(
      [&] {
        c = AgentClient::Connect(sock, "dns");
        return c.ok() || !(*agent)->Running();
      },
      absl::Seconds(30)));
  ASSERT_TRUE(c.ok()) << c.status() << "; gdragent: " << agent_log();
  auto mem = SharedMemory::Create(kMiB);
  ASSERT_TRUE(mem.ok());
  auto rkey = c->Register(**mem);  // while the name has one address
  ASSERT_TRUE(rkey.ok()) << rkey.status();
  ASSERT_TRUE(c->Get("alpha", 4096, c->Describe(**mem, *rkey, 0, kMiB)).ok());
  EXPECT_TRUE(DaemonPattern(**mem, "alpha", 4096, kMiB));

  // A second address appears under the name: its daemon is found, the region registered there.
  auto b = StartDaemon({"--volume", "beta=4MiB", "--drain-timeout-ms", "200"}, how_b);
  ASSERT_NE(b, nullptr);
  WriteHosts(hosts, base.str() + "\n", {"127.0.0.1", "127.0.0.2"});
  absl::Status last = GetUntil(*c, **mem, *rkey, "beta", 8192, kMiB, absl::StatusCode::kOk);
  EXPECT_TRUE(last.ok()) << last << "; gdragent: " << agent_log();
  EXPECT_TRUE(DaemonPattern(**mem, "beta", 8192, kMiB));
  ASSERT_TRUE(c->Get("alpha", 0, c->Describe(**mem, *rkey, 0, 4096)).ok());
  auto info = c->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->transports(0).detail(),
              AllOf(HasSubstr(absl::StrCat("agent -> 127.0.0.1:", p)),
                    HasSubstr(absl::StrCat("agent -> 127.0.0.2:", p))));

  // The first address leaves the name: its daemon is retired, its volume no longer routed.
  WriteHosts(hosts, base.str() + "\n", {"127.0.0.2"});
  last = GetUntil(*c, **mem, *rkey, "alpha", 0, 4096, absl::StatusCode::kNotFound);
  EXPECT_EQ(last.code(), absl::StatusCode::kNotFound) << last;
  EXPECT_THAT(std::string(last.message()),
              AllOf(HasSubstr(absl::StrCat("127.0.0.2:", p, " serves beta")),
                    Not(HasSubstr(absl::StrCat("127.0.0.1:", p)))));
  EXPECT_TRUE(c->Get("beta", 0, c->Describe(**mem, *rkey, 0, 4096)).ok());
  c = absl::UnavailableError("closed");
  ASSERT_TRUE((*agent)->Signal(SIGTERM).ok());
  EXPECT_TRUE((*agent)->Wait(absl::Seconds(30)).ok());
}

TEST(AgentUpstreamsTest, AMembersFileClusterIsStripedOverItsDaemons) {
  auto d0 = StartDaemon({"--volume", "vol0=16MiB"});
  auto d1 = StartDaemon({"--volume", "vol0=16MiB"});
  ASSERT_NE(d0, nullptr);
  ASSERT_NE(d1, nullptr);
  auto dir = integ::TempDir::Create("agent-cluster");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string members = (*dir)->File("cluster.json");
  constexpr uint64_t kUnit = 64 * 1024;
  {
    std::ofstream f(members);
    f << R"({"members": [{"id": "f0", "address": ")" << d0->address()
      << R"("}, {"id": "f1", "address": ")" << d1->address()
      << R"("}], "volumes": [{"name": "vol0", "stripe_unit": ")" << kUnit
      << R"(", "members": ["f0", "f1"], "replicas": 1, "epoch": "1", "size": ")" << 32 * kMiB
      << R"("}]})";
  }
  auto agent = AgentProcess::Start("", {"--cluster-file", members, "--cluster-workers", "4"});
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto c = AgentClient::Connect((*agent)->socket_path(), "cluster");
  ASSERT_TRUE(c.ok()) << c.status();
  auto mem = SharedMemory::Create(4 * kMiB);
  ASSERT_TRUE(mem.ok());
  auto rkey = c->Register(**mem);
  ASSERT_TRUE(rkey.ok()) << rkey.status();

  const uint64_t b0 = DaemonBytes(*d0), b1 = DaemonBytes(*d1);
  // Unaligned, across stripe units of both members.
  absl::Status rt = RoundTrip(*c, **mem, *rkey, "vol0", 7, 4 * kMiB - 11, 3);
  ASSERT_TRUE(rt.ok()) << rt;
  // Each member carried about half of it, both ways.
  const uint64_t moved0 = DaemonBytes(*d0) - b0, moved1 = DaemonBytes(*d1) - b1;
  EXPECT_EQ(moved0 + moved1, 2 * (4 * kMiB - 11));
  EXPECT_GT(moved0, 3 * kMiB);
  EXPECT_GT(moved1, 3 * kMiB);

  // The logical bytes lie on the members by the stripe rule: unit k on member k % 2.
  std::memset((*mem)->data(), 0, kUnit);
  ASSERT_TRUE(c->Get("vol0", kUnit, c->Describe(**mem, *rkey, 0, kUnit)).ok());
  gdrstore::ClientOptions o;
  o.daemon_address = d1->address();
  auto direct = gdrstore::Client::Connect(o);
  ASSERT_TRUE(direct.ok()) << direct.status();
  auto buf = (*direct)->AllocateBuffer(kUnit);
  ASSERT_TRUE(buf.ok()) << buf.status();
  ASSERT_TRUE((*direct)->Write({"vol0", 0, kUnit}, **buf).ok());  // its store -> buf
  EXPECT_EQ(std::memcmp((*buf)->data(), (*mem)->data(), kUnit), 0);

  // What a cluster op cannot carry is refused with the reason.
  auto crc = c->Get("vol0", 0, c->Describe(**mem, *rkey, 0, 4096), /*crc32c=*/true);
  EXPECT_EQ(crc.status().code(), absl::StatusCode::kUnimplemented) << crc.status();
  EXPECT_THAT(std::string(crc.status().message()), HasSubstr("crc32c"));
  auto past = c->Get("vol0", 32 * kMiB - 4096, c->Describe(**mem, *rkey, 0, 8192));
  EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange) << past.status();

  auto info = c->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->transports(0).detail(),
              AllOf(HasSubstr(absl::StrCat("agent -> cluster ", members, " over tcp")),
                    HasSubstr(absl::StrCat("f0 at ", d0->address(), " (healthy)")),
                    HasSubstr(absl::StrCat("f1 at ", d1->address(), " (healthy)"))));
  ASSERT_EQ(info->volumes_size(), 1);
  EXPECT_EQ(info->volumes(0).size(), 32 * kMiB);
  EXPECT_THAT(info->volumes(0).backing(), HasSubstr("cluster: 2 members"));
}

TEST(AgentUpstreamsTest, AnEtcdClusterServesItsVolumesThroughTheAgent) {
  if (absl::Status st = integ::EtcdServer::Available(); !st.ok()) GTEST_SKIP() << st.message();
  auto etcd = integ::EtcdServer::Create();
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const std::string url = (*etcd)->url("gdr-agent");
  std::vector<std::unique_ptr<integ::DaemonProcess>> members;
  for (int i = 0; i < 3; ++i) {
    // Stopped under the agent's open Streams: a short drain.
    members.push_back(StartDaemon({"--cluster", url, "--cluster-id", absl::StrCat("m", i),
                                   "--volume", "vol0=16MiB", "--drain-timeout-ms", "200"}));
    ASSERT_NE(members.back(), nullptr);
  }
  gdrstore::ClusterOptions co;
  co.etcd_url = url;
  auto admin = gdrstore::ClusterClient::Open(co);
  ASSERT_TRUE(admin.ok()) << admin.status();
  ASSERT_TRUE(integ::PollUntil(
      [&] {
        size_t present = 0;
        for (const auto& m : (*admin)->Members()) present += m.present;
        return present == 3;
      },
      absl::Seconds(20), absl::Milliseconds(100)));
  auto layout = (*admin)->CreateVolume("vol0", kMiB, /*replicas=*/2, {});
  ASSERT_TRUE(layout.ok()) << layout.status();

  auto agent = AgentProcess::Start("", {"--cluster", url});
  ASSERT_TRUE(agent.ok()) << agent.status();
  auto c = AgentClient::Connect((*agent)->socket_path(), "etcd-cluster");
  ASSERT_TRUE(c.ok()) << c.status();
  auto mem = SharedMemory::Create(4 * kMiB);
  ASSERT_TRUE(mem.ok());
  auto rkey = c->Register(**mem);
  ASSERT_TRUE(rkey.ok()) << rkey.status();
  absl::Status rt = RoundTrip(*c, **mem, *rkey, "vol0", kMiB / 2 + 3, 3 * kMiB, 11);
  ASSERT_TRUE(rt.ok()) << rt;

  // Two replicas: with one member gone, the agent's gets still come back whole.
  members[1].reset();
  std::memset((*mem)->data(), 0, 3 * kMiB);
  auto got = c->Get("vol0", kMiB / 2 + 3, c->Describe(**mem, *rkey, 0, 3 * kMiB));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(PatternMismatch(PatternSeed("vol0", 11), kMiB / 2 + 3,
                               std::span<const std::byte>((*mem)->data(), 3 * kMiB))
                   .has_value());
  auto info = c->Info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->transports(0).detail(), HasSubstr(absl::StrCat("agent -> cluster ", url)));
}

}  // namespace
}  // namespace gdr::agent::test
