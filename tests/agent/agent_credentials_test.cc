// The agent's own credentials toward its daemons re-read while it serves: its token file in a
// Kubernetes Secret volume (swapped through `..data`, no signal) and a real gdrstored whose
// token file is rotated to accept only the new token. The agent's client keeps its session,
// channel and registered memory throughout, and ops running through the swap all succeed; a bad
// new Secret is refused with the old token kept; a region left idle does not keep the replaced
// connection open. The same for an agent on a members-file cluster, for its client certificate
// toward an mTLS daemon that grants by certificate, and for an etcd cluster agent's certificate
// toward an etcd that comes to trust only a new CA.
#include <gmock/gmock.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <span>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/pattern.h"
#include "gdrstore/cluster.h"
#include "tests/agent/agent_harness.h"
#include "tests/common/etcd_server.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/secret_volume.h"
#include "tests/integration/test_pki.h"

namespace gdr::agent::test {
namespace {

constexpr char kOld[] = "gdragent-test-token-old-0123456789";
constexpr char kNew[] = "gdragent-test-token-new-9876543210";

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
  ::chmod(path.c_str(), 0600);
}

// A client of the agent with memory registered: what it keeps through every swap.
struct Session {
  static constexpr uint64_t kBytes = 64 << 10;
  AgentClient client;
  std::unique_ptr<SharedMemory> mem;
  uint32_t rkey = 0;

  void Open(const AgentProcess& agent) {
    absl::StatusOr<AgentClient> c = AgentClient::Connect(agent.socket_path(), "credentials");
    absl::StatusOr<std::unique_ptr<SharedMemory>> m = SharedMemory::Create(1 << 20);
    ASSERT_TRUE(c.ok() && m.ok()) << c.status() << "; " << m.status();
    client = *std::move(c);
    mem = *std::move(m);
    absl::StatusOr<uint32_t> r = client.Register(*mem);
    ASSERT_TRUE(r.ok()) << r.status();
    rkey = *r;
  }
  // A get of `volume` at `at`, its bytes checked against the daemon's pattern.
  bool GetVerified(uint64_t at, const std::string& volume = "vol0") {
    auto got = client.Get(volume, at, client.Describe(*mem, rkey, 0, kBytes));
    EXPECT_TRUE(got.ok()) << volume << ": " << got.status();
    return got.ok() && !PatternMismatch(PatternSeed(volume), at,
                                        std::span<const std::byte>(mem->data(), kBytes))
                            .has_value();
  }
  absl::StatusCode GetCode(const std::string& volume) {
    return client.Get(volume, 0, client.Describe(*mem, rkey, 0, kBytes)).status().code();
  }
};

// After a Secret that must be refused: the agent says so and goes on serving `volume` with the
// credentials it had.
void ExpectNotReloaded(AgentProcess& agent, Session& c, const std::string& volume) {
  ASSERT_TRUE(integ::PollUntil([&] {
    return absl::StrContains(agent.Stderr(), "credentials not reloaded");
  }, absl::Seconds(20))) << agent.Stderr();
  EXPECT_TRUE(c.GetVerified(8192, volume));
  EXPECT_TRUE(agent.Running());
}

// A daemon taking the tokens of its file, and an agent whose token file is a Secret volume
// holding the old token, with one client session. `cluster`: the agent reaches the daemon as
// the one member of a members file's cluster (--cluster-file) instead of by --daemon.
class AgentTokenTest : public ::testing::Test {
 protected:
  void Start(const std::string& daemon_tokens_text, bool cluster = false) {
    auto dir = integ::TempDir::Create("gdr-agent-cred");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *std::move(dir);
    daemon_tokens_ = dir_->File("daemon.tokens");
    WriteFile(daemon_tokens_, daemon_tokens_text);
    auto d = integ::DaemonProcess::Start({"--volume", "vol0=16MiB", "--token-file",
                                          daemon_tokens_});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    ASSERT_EQ(::mkdir(dir_->File("secret").c_str(), 0755), 0);
    secret_ = std::make_unique<integ::SecretVolume>(dir_->File("secret"));
    ASSERT_NO_FATAL_FAILURE(secret_->Publish(absl::StrCat(kOld, "\n")));
    std::vector<std::string> args = {"--token-file", secret_->path()};
    if (cluster) {
      std::ofstream(dir_->File("cluster.json"))
          << R"({"members": [{"id": "m0", "address": ")" << daemon_->address()
          << R"("}], "volumes": [{"name": "vol0", "stripe_unit": "65536", "members": ["m0"], )"
          << R"("replicas": 1, "epoch": "1", "size": "16777216"}]})";
      args.insert(args.end(), {"--cluster-file", dir_->File("cluster.json")});
    }
    auto a = AgentProcess::Start(cluster ? "" : daemon_->address(), args);
    ASSERT_TRUE(a.ok()) << a.status();
    agent_ = *std::move(a);
    ASSERT_NO_FATAL_FAILURE(c_.Open(*agent_));
  }

  // A rotation (the daemon taking both tokens) with the session's region left idle from before
  // the swap until the replaced connection is logged `closed`: nothing but the agent's own
  // housekeeping lets the region's registration on it go. Its next op then registers anew.
  void RotateWithTheRegionIdle(bool cluster, const std::string& closed) {
    ASSERT_NO_FATAL_FAILURE(Start(absl::StrCat(kOld, "\n", kNew, "\n"), cluster));
    ASSERT_TRUE(c_.GetVerified(4096));
    secret_->Publish(absl::StrCat(kNew, "\n"));
    ASSERT_TRUE(integ::PollUntil([&] { return absl::StrContains(agent_->Stderr(), closed); },
                                 absl::Seconds(20)))
        << agent_->Stderr();
    EXPECT_THAT(agent_->Stderr(), ::testing::HasSubstr("credentials reloaded"));
    EXPECT_TRUE(c_.GetVerified(1 << 20));
    EXPECT_TRUE(c_.GetVerified(4096));
  }

  std::unique_ptr<integ::TempDir> dir_;
  std::string daemon_tokens_;
  std::unique_ptr<integ::DaemonProcess> daemon_;
  std::unique_ptr<integ::SecretVolume> secret_;
  std::unique_ptr<AgentProcess> agent_;
  Session c_;
};

TEST_F(AgentTokenTest, TokenSecretSwappedIsUsedForNewOpsAndABadOneIsRefused) {
  ASSERT_NO_FATAL_FAILURE(Start(absl::StrCat(kOld, "\n")));
  ASSERT_TRUE(c_.GetVerified(4096));

  // The daemon takes the new token only (it re-reads its file on its own): the agent, still
  // presenting the old one, is refused.
  WriteFile(daemon_tokens_, absl::StrCat(kNew, "\n"));
  ASSERT_TRUE(integ::PollUntil([&] {
    auto info = c_.client.Info();
    return !info.ok() && info.status().code() == absl::StatusCode::kPermissionDenied;
  }, absl::Seconds(20))) << daemon_->Stderr();

  // The agent's Secret gets the new token: the same client, channel and memory are served again.
  secret_->Publish(absl::StrCat(kNew, "\n"));
  ASSERT_TRUE(integ::PollUntil([&] { return c_.client.Info().ok(); }, absl::Seconds(20)))
      << agent_->Stderr();
  EXPECT_TRUE(c_.GetVerified(1 << 20));
  EXPECT_THAT(agent_->Stderr(), ::testing::HasSubstr(secret_->path() + " changed"));
  // The memory moved to the new connection at that op: the old one, holding nothing, closes.
  EXPECT_TRUE(integ::PollUntil([&] {
    return absl::StrContains(agent_->Stderr(), "that new credentials replaced is closed");
  }, absl::Seconds(20))) << agent_->Stderr();

  // A Secret whose token does not pass the checks made at start is refused, saying why; the
  // agent goes on with the token it has.
  secret_->Publish("short\n");
  ASSERT_TRUE(integ::PollUntil([&] {
    return absl::StrContains(agent_->Stderr(), "credentials not reloaded");
  }, absl::Seconds(20))) << agent_->Stderr();
  EXPECT_TRUE(c_.client.Info().ok());
  EXPECT_TRUE(c_.GetVerified(2 << 20));
  EXPECT_TRUE(agent_->Running());
  EXPECT_FALSE(absl::StrContains(agent_->Stderr(), kNew)) << "a token was logged";
  EXPECT_FALSE(absl::StrContains(agent_->Stderr(), kOld)) << "a token was logged";
}

// A rotation as an operator runs it (the daemon takes both tokens meanwhile), with a client's
// ops running all through it: none fails. Those sent before the swap finish on the replaced
// connection, which closes once they have; later ones go over the new one.
TEST_F(AgentTokenTest, OpsRunningThroughTheSwapAllSucceed) {
  ASSERT_NO_FATAL_FAILURE(Start(absl::StrCat(kOld, "\n", kNew, "\n")));

  std::atomic<bool> stop{false};
  std::atomic<int> done{0};
  absl::Mutex mu;
  std::vector<std::string> failed;
  std::thread busy([&] {
    for (uint64_t at = 0; !stop.load(); at = (at + Session::kBytes) % (8 << 20)) {
      const gdrstore::v1::RemoteBuffer to =
          c_.client.Describe(*c_.mem, c_.rkey, 0, Session::kBytes);
      auto got = c_.client.Get("vol0", at, to);
      if (got.ok()) {
        done.fetch_add(1);
        continue;
      }
      absl::MutexLock lock(&mu);
      failed.push_back(got.status().ToString());
    }
  });
  absl::Cleanup join = [&] {
    stop.store(true);
    busy.join();
  };
  ASSERT_TRUE(integ::PollUntil([&] { return done.load() > 0; }, absl::Seconds(20)));
  secret_->Publish(absl::StrCat(kNew, "\n"));
  ASSERT_TRUE(integ::PollUntil([&] {
    return absl::StrContains(agent_->Stderr(), "that new credentials replaced is closed");
  }, absl::Seconds(20))) << agent_->Stderr();
  const int at_close = done.load();
  ASSERT_TRUE(integ::PollUntil([&] { return done.load() > at_close; }, absl::Seconds(20)));
  std::move(join).Invoke();
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(failed.empty()) << failed.size() << " ops failed, the first: " << failed.front();
  EXPECT_THAT(agent_->Stderr(), ::testing::HasSubstr("credentials reloaded"));
}

TEST_F(AgentTokenTest, AClusterAgentTakesTheNewTokenToo) {
  ASSERT_NO_FATAL_FAILURE(Start(absl::StrCat(kOld, "\n"), /*cluster=*/true));
  ASSERT_EQ(c_.GetCode("vol0"), absl::StatusCode::kOk);
  WriteFile(daemon_tokens_, absl::StrCat(kNew, "\n"));
  ASSERT_TRUE(integ::PollUntil([&] { return c_.GetCode("vol0") != absl::StatusCode::kOk; },
                               absl::Seconds(20))) << daemon_->Stderr();
  secret_->Publish(absl::StrCat(kNew, "\n"));
  ASSERT_TRUE(integ::PollUntil([&] { return c_.GetCode("vol0") == absl::StatusCode::kOk; },
                               absl::Seconds(20))) << agent_->Stderr();
  EXPECT_TRUE(integ::PollUntil([&] {
    return absl::StrContains(agent_->Stderr(), "that new credentials replaced are closed");
  }, absl::Seconds(20))) << agent_->Stderr();
}

TEST_F(AgentTokenTest, AnIdleRegionDoesNotKeepTheReplacedConnectionOpen) {
  RotateWithTheRegionIdle(false, "that new credentials replaced is closed");
}

TEST_F(AgentTokenTest, AnIdleRegionDoesNotKeepTheReplacedClusterOpen) {
  RotateWithTheRegionIdle(true, "that new credentials replaced are closed");
}

// mTLS: the daemon grants each client certificate its own volume (san: lines), so which volume
// the agent reaches says which certificate it presents.
TEST(AgentCredentialsTest, CertificateSecretSwappedIsPresentedOnNewConnections) {
  auto dir = integ::TempDir::Create("gdr-agent-tls");
  ASSERT_TRUE(dir.ok()) << dir.status();
  // The daemon stages its certificates under $TMPDIR: inside the test's directory.
  const char* tmpdir = std::getenv("TMPDIR");
  absl::Cleanup restore = [was = std::string(tmpdir == nullptr ? "" : tmpdir)] {
    if (was.empty()) {
      ::unsetenv("TMPDIR");
    } else {
      ::setenv("TMPDIR", was.c_str(), 1);
    }
  };
  ::setenv("TMPDIR", (*dir)->path().c_str(), 1);
  integ::TestPki pki((*dir)->path());
  auto ca = pki.MakeCa("agent");
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto server = pki.Issue(*ca, "server", integ::TestPki::Use::kServer);
  auto a = pki.Issue(*ca, "client-a", integ::TestPki::Use::kClient, "URI:spiffe://test/a");
  auto b = pki.Issue(*ca, "client-b", integ::TestPki::Use::kClient, "URI:spiffe://test/b");
  ASSERT_TRUE(server.ok() && a.ok() && b.ok());
  const std::string tokens = (*dir)->File("daemon.tokens");
  WriteFile(tokens, "san:spiffe://test/a get=v1\nsan:spiffe://test/b get=v2\n");
  grpc::SslCredentialsOptions health;
  health.pem_root_certs = integ::ReadFileOrEmpty(ca->cert);
  health.pem_cert_chain = integ::ReadFileOrEmpty(a->cert);
  health.pem_private_key = integ::ReadFileOrEmpty(a->key);
  integ::DaemonStart how;
  how.credentials = grpc::SslCredentials(health);
  auto daemon = integ::DaemonProcess::Start(
      {"--volume", "v1=4MiB", "--volume", "v2=4MiB", "--tls-cert", server->cert, "--tls-key",
       server->key, "--tls-client-ca", ca->cert, "--token-file", tokens},
      how);
  ASSERT_TRUE(daemon.ok()) << daemon.status();

  ASSERT_EQ(::mkdir((*dir)->File("secret").c_str(), 0755), 0);
  integ::SecretVolume secret((*dir)->File("secret"));
  auto publish = [&](const integ::CertFiles& cert, const integ::CertFiles& key) {
    secret.Publish({{"tls.crt", integ::ReadFileOrEmpty(cert.cert)},
                    {"tls.key", integ::ReadFileOrEmpty(key.key)}});
  };
  publish(*a, *a);
  auto agent = AgentProcess::Start((*daemon)->address(),
                                   {"--tls-ca", ca->cert, "--tls-cert", secret.path("tls.crt"),
                                    "--tls-key", secret.path("tls.key")});
  ASSERT_TRUE(agent.ok()) << agent.status();
  Session c;
  ASSERT_NO_FATAL_FAILURE(c.Open(**agent));
  ASSERT_TRUE(c.GetVerified(0, "v1"));
  EXPECT_EQ(c.GetCode("v2"), absl::StatusCode::kPermissionDenied);

  publish(*b, *b);
  ASSERT_TRUE(integ::PollUntil([&] {
    return c.GetCode("v2") == absl::StatusCode::kOk;
  }, absl::Seconds(20))) << (*agent)->Stderr();
  EXPECT_TRUE(c.GetVerified(4096, "v2"));
  EXPECT_EQ(c.GetCode("v1"), absl::StatusCode::kPermissionDenied);

  // A certificate with another's key is refused by the checks made at start; b stays.
  publish(*a, *b);
  ExpectNotReloaded(**agent, c, "v2");
}

// etcd requiring client certificates, restarted to trust only a new CA (its server certificate
// stays): the agent's old certificate is refused from then on, so a volume laid out after the
// restart is found through the agent only once the agent presents the new certificate from its
// swapped Secret. The daemon's own certificate is of the new CA throughout.
TEST(AgentCredentialsTest, EtcdClientCertificateSecretSwappedFollowsEtcdsNewCa) {
  if (absl::Status st = integ::EtcdServer::Available(); !st.ok()) GTEST_SKIP() << st.message();
  auto dir = integ::TempDir::Create("gdr-agent-etcd-tls");
  ASSERT_TRUE(dir.ok()) << dir.status();
  integ::TestPki pki((*dir)->path());
  auto old_ca = pki.MakeCa("etcd-old");
  auto new_ca = pki.MakeCa("etcd-new");
  ASSERT_TRUE(old_ca.ok() && new_ca.ok()) << old_ca.status() << new_ca.status();
  auto server = pki.Issue(*old_ca, "etcd-server", integ::TestPki::Use::kServer);
  auto member = pki.Issue(*new_ca, "member", integ::TestPki::Use::kClient, "DNS:gdrstored");
  auto agent_old = pki.Issue(*old_ca, "agent-old", integ::TestPki::Use::kClient, "DNS:agent");
  auto agent_new = pki.Issue(*new_ca, "agent-new", integ::TestPki::Use::kClient, "DNS:agent");
  ASSERT_TRUE(server.ok() && member.ok() && agent_old.ok() && agent_new.ok());
  const std::string both = (*dir)->File("both-cas.pem");
  WriteFile(both, integ::ReadFileOrEmpty(old_ca->cert) + integ::ReadFileOrEmpty(new_ca->cert));
  integ::EtcdTls tls{*server, both, old_ca->cert, *member};
  auto etcd = integ::EtcdServer::Create(absl::Seconds(30), tls);
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const std::string url = (*etcd)->url("gdr-agent-tls");
  auto daemon = integ::DaemonProcess::Start(
      {"--cluster", url, "--cluster-id", "m0", "--cluster-ttl", "3", "--cluster-tls-ca",
       old_ca->cert, "--cluster-tls-cert", member->cert, "--cluster-tls-key", member->key,
       "--volume", "vol0=4MiB", "--volume", "vol1=4MiB"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  gdrstore::ClusterOptions admin_options;
  admin_options.etcd_url = url;
  admin_options.etcd_tls_ca = old_ca->cert;
  admin_options.etcd_tls_cert = member->cert;
  admin_options.etcd_tls_key = member->key;
  // A layout naming m0 once its registration is in etcd.
  auto lay_out = [&](const std::string& volume) {
    absl::Status last;
    const bool made = integ::PollUntil([&] {
      auto admin = gdrstore::ClusterClient::Open(admin_options);
      last = admin.ok() ? (*admin)->CreateVolume(volume, 64 << 10, 1, {"m0"}).status()
                        : admin.status();
      return last.ok();
    }, absl::Seconds(20), absl::Milliseconds(200));
    EXPECT_TRUE(made) << volume << ": " << last << "; daemon: " << (*daemon)->Stderr();
    return made;
  };
  ASSERT_TRUE(lay_out("vol0"));

  ASSERT_EQ(::mkdir((*dir)->File("secret").c_str(), 0755), 0);
  integ::SecretVolume secret((*dir)->File("secret"));
  auto publish = [&](const integ::CertFiles& cert, const integ::CertFiles& key) {
    secret.Publish({{"ca.crt", integ::ReadFileOrEmpty(old_ca->cert)},
                    {"tls.crt", integ::ReadFileOrEmpty(cert.cert)},
                    {"tls.key", integ::ReadFileOrEmpty(key.key)}});
  };
  publish(*agent_old, *agent_old);
  auto agent = AgentProcess::Start(
      "", {"--cluster", url, "--cluster-tls-ca", secret.path("ca.crt"), "--cluster-tls-cert",
           secret.path("tls.crt"), "--cluster-tls-key", secret.path("tls.key")});
  ASSERT_TRUE(agent.ok()) << agent.status();
  Session c;
  ASSERT_NO_FATAL_FAILURE(c.Open(**agent));
  ASSERT_TRUE(c.GetVerified(4096));

  // etcd now trusts the new CA only: the agent's etcd connection is refused, so vol1, laid out
  // after, is unknown to it; its ops on vol0 go on (they go to the member itself).
  ASSERT_TRUE((*etcd)->Stop().ok());
  tls.trusted_ca = new_ca->cert;
  (*etcd)->set_tls(tls);
  ASSERT_TRUE((*etcd)->Start().ok()) << (*etcd)->Log();
  ASSERT_TRUE(lay_out("vol1"));
  EXPECT_EQ(c.GetCode("vol1"), absl::StatusCode::kNotFound);
  EXPECT_TRUE(c.GetVerified(8192));

  publish(*agent_new, *agent_new);
  ASSERT_TRUE(integ::PollUntil([&] { return c.GetCode("vol1") == absl::StatusCode::kOk; },
                               absl::Seconds(20)))
      << (*agent)->Stderr();
  EXPECT_TRUE(c.GetVerified(4096, "vol1"));
  EXPECT_TRUE(c.GetVerified(12288));

  // The old certificate again (files that pass, a certificate etcd refuses): not reloaded, the
  // running connection kept, vol1 still served.
  publish(*agent_old, *agent_old);
  ExpectNotReloaded(**agent, c, "vol1");
}

}  // namespace
}  // namespace gdr::agent::test
