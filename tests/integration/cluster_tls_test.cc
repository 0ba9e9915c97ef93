// ClusterClient against an etcd that takes only mutual TLS (the C++ and C options, bad TLS files
// refused naming them, an options struct of the older layout), and three etcd members with the
// TLS flags of deploy/kubernetes/examples/etcd.yaml serving daemons and clients.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "gdrstore/cluster.h"
#include "gdrstore/gdrstore.h"
#include "tests/common/etcd_server.h"
#include "tests/integration/cluster_ops.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/test_pki.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// etcd's client port as examples/etcd.yaml runs it: TLS, client certificates required, and a
// daemon m0 registered through it with the CA and a certificate of its own.
class ClusterTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status st = EtcdServer::Available(); !st.ok()) GTEST_SKIP() << st.message();
    auto dir = TempDir::Create("cluster-tls");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
    TestPki pki(dir_->path());
    auto ca = pki.MakeCa("etcd");
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = *ca;
    auto server = pki.Issue(ca_, "etcd-server", TestPki::Use::kServer);
    auto member = pki.Issue(ca_, "member", TestPki::Use::kClient, "DNS:gdrstored");
    ASSERT_TRUE(server.ok() && member.ok()) << server.status() << member.status();
    member_ = *member;
    auto client_port = BoundPort::Reserve();
    auto peer_port = BoundPort::Reserve();
    ASSERT_TRUE(client_port.ok() && peer_port.ok());
    endpoint_ = client_port->address();
    const std::string peer = absl::StrCat("http://", peer_port->address());
    client_port->Release();
    peer_port->Release();
    std::vector<std::string> argv = {EtcdServer::kBinary, "--name=tls",
                                     "--data-dir=" + dir_->File("data"),
                                     "--listen-client-urls=https://" + endpoint_,
                                     "--advertise-client-urls=https://" + endpoint_,
                                     "--listen-peer-urls=" + peer,
                                     "--initial-advertise-peer-urls=" + peer,
                                     "--initial-cluster=tls=" + peer,
                                     "--cert-file=" + server->cert, "--key-file=" + server->key,
                                     "--trusted-ca-file=" + ca_.cert, "--client-cert-auth"};
    auto etcd = ChildProcess::Spawn(argv, dir_->File("etcd.out"), dir_->File("etcd.err"));
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = std::move(*etcd);
    url_ = absl::StrCat("etcd://", endpoint_, "/gdr-tls");
    auto d = DaemonProcess::Start({"--cluster", url_, "--cluster-id", "m0", "--cluster-ttl", "3",
                                   "--cluster-tls-ca", ca_.cert, "--cluster-tls-cert",
                                   member_.cert, "--cluster-tls-key", member_.key, "--volume",
                                   "vol0=4MiB"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  // The client's options: the etcd URL, its CA and the member's certificate.
  gdrstore::ClusterOptions Tls() const {
    gdrstore::ClusterOptions o;
    o.etcd_url = url_;
    o.etcd_tls_ca = ca_.cert;
    o.etcd_tls_cert = member_.cert;
    o.etcd_tls_key = member_.key;
    return o;
  }

  // Whether `open` opens a client seeing m0 present, tried until it does (etcd and the
  // daemon's registration come up in their own time); `last` says why not.
  static bool SeesM0(const std::function<absl::Status(bool* seen)>& open, absl::Status* last) {
    return PollUntil(
        [&] {
          bool seen = false;
          *last = open(&seen);
          return last->ok() && seen;
        },
        absl::Seconds(20), absl::Milliseconds(200));
  }

  std::unique_ptr<TempDir> dir_;
  CertFiles ca_, member_;
  std::string endpoint_, url_;
  std::unique_ptr<ChildProcess> etcd_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(ClusterTlsTest, MembersAndClientsReachAnEtcdThatTakesOnlyMutualTls) {
  std::unique_ptr<gdrstore::ClusterClient> c;
  absl::Status last;
  bool seen = SeesM0(
      [&](bool* seen) {
        auto opened = gdrstore::ClusterClient::Open(Tls());
        if (!opened.ok()) return opened.status();
        c = std::move(*opened);
        for (const auto& m : c->Members()) *seen |= m.present && m.entry.id() == "m0";
        return absl::OkStatus();
      },
      &last);
  ASSERT_TRUE(seen) << last << "; daemon: " << daemon_->Stderr();
  // The layout goes into etcd over TLS, and ops follow it to the member.
  auto layout = c->CreateVolume("vol0", 64 * 1024, 1, {});
  ASSERT_TRUE(layout.ok()) << layout.status();
  auto buf = c->AllocateBuffer(kMiB);
  ASSERT_TRUE(buf.ok()) << buf.status();
  ASSERT_TRUE(PutPattern(*c, **buf, "vol0", 4097, kMiB - 3, 7).ok());
  absl::Status got = GetVerified(*c, **buf, "vol0", 4097, kMiB - 3, 7);
  EXPECT_TRUE(got.ok()) << got;
  // gdrctl takes the daemon's flag names; a file it cannot read is a usage error naming it.
  std::vector<std::string> argv = {GDR_GDRCTL_BIN, "--cluster", url_, "--cluster-tls-ca", ca_.cert,
                                   "--cluster-tls-cert", member_.cert, "--cluster-tls-key",
                                   member_.key, "cluster", "status"};
  auto status = RunProcess(argv, dir_->path(), "gdrctl-tls", absl::Seconds(60));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->exit_code, 0) << status->Describe() << status->out;
  EXPECT_TRUE(absl::StrContains(status->out, "m0")) << status->out;
  argv[4] = dir_->File("missing-ca.pem");
  auto missing = RunProcess(argv, dir_->path(), "gdrctl-tls-missing", absl::Seconds(60));
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_EQ(missing->exit_code, 2) << missing->Describe();
  EXPECT_TRUE(absl::StrContains(missing->err, argv[4])) << missing->Describe();

  // Without a certificate etcd closes the handshake: UNAVAILABLE naming the endpoint, as etcd
  // away is. In plaintext it is no etcd at all.
  gdrstore::ClusterOptions no_cert = Tls();
  no_cert.etcd_tls_cert.clear();
  no_cert.etcd_tls_key.clear();
  no_cert.etcd_timeout = std::chrono::milliseconds(500);
  auto refused = gdrstore::ClusterClient::Open(no_cert);
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), endpoint_)) << refused.status();
  gdrstore::ClusterOptions plain;
  plain.etcd_url = url_;
  plain.etcd_timeout = std::chrono::milliseconds(500);
  EXPECT_FALSE(gdrstore::ClusterClient::Open(plain).ok());
  // The daemon refuses half a pair before it serves.
  auto half = RunProcess({GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--cluster", url_,
                          "--cluster-tls-cert", member_.cert},
                         dir_->path(), "half-tls", absl::Seconds(30));
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_NE(half->exit_code, 0);
  EXPECT_TRUE(absl::StrContains(half->err, "--cluster-tls-key go together")) << half->Describe();
}

// The C ABI's etcd_tls_* fields: the same cluster through gdrstore_cluster_open, a put and a
// get through the handle.
TEST_F(ClusterTlsTest, TheCAbiTakesEtcdTls) {
  gdrstore_cluster* c = nullptr;
  absl::Cleanup close = [&] { gdrstore_cluster_close(c); };
  absl::Status last;
  bool seen = SeesM0(
      [&](bool* seen) {
        gdrstore_cluster_options o;
        gdrstore_cluster_options_init(&o);
        o.etcd_url = url_.c_str();
        o.etcd_tls_ca = ca_.cert.c_str();
        o.etcd_tls_cert = member_.cert.c_str();
        o.etcd_tls_key = member_.key.c_str();
        gdrstore_cluster_close(c);
        c = nullptr;
        char error[512] = "";
        const gdrstore_status st = gdrstore_cluster_open(&o, &c, error, sizeof(error));
        if (st != GDRSTORE_OK) return absl::Status(static_cast<absl::StatusCode>(st), error);
        char* json = nullptr;
        if (gdrstore_cluster_status_json(c, &json) != GDRSTORE_OK) {
          return absl::InternalError(gdrstore_error(c));
        }
        *seen = absl::StrContains(json, R"("id":"m0")") &&
                absl::StrContains(json, R"("present":true)");
        gdrstore_free(json);
        return absl::OkStatus();
      },
      &last);
  ASSERT_TRUE(seen) << last << "; daemon: " << daemon_->Stderr();
  ASSERT_EQ(gdrstore_cluster_create_volume(c, "vol0", 64 * 1024, 1, "m0", nullptr), GDRSTORE_OK)
      << gdrstore_error(c);
  gdrstore_cluster_buffer* b = nullptr;
  ASSERT_EQ(gdrstore_cluster_alloc_host(c, 8192, &b), GDRSTORE_OK) << gdrstore_error(c);
  auto* p = static_cast<unsigned char*>(gdrstore_cluster_buffer_data(b));
  for (int i = 0; i < 4096; ++i) p[i] = static_cast<unsigned char>(i * 7 + 1);
  ASSERT_EQ(gdrstore_cluster_put(c, "vol0", 65535, 4096, b, 0), GDRSTORE_OK) << gdrstore_error(c);
  ASSERT_EQ(gdrstore_cluster_get(c, "vol0", 65535, 4096, b, 4096), GDRSTORE_OK)
      << gdrstore_error(c);
  EXPECT_EQ(std::memcmp(p, p + 4096, 4096), 0);
  gdrstore_cluster_buffer_release(b);
}

// TLS files the etcd client cannot use are refused before any connection, naming the option
// and the file; the C ABI says the same.
TEST(ClusterTlsFilesTest, UnreadableOrNonPemFilesAndHalfAPairAreRefusedNamingThem) {
  auto dir = TempDir::Create("cluster-tls-files");
  ASSERT_TRUE(dir.ok()) << dir.status();
  TestPki pki((*dir)->path());
  auto ca = pki.MakeCa("files");
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto client = pki.Issue(*ca, "client", TestPki::Use::kClient, "DNS:client");
  ASSERT_TRUE(client.ok()) << client.status();
  const std::string not_pem = (*dir)->File("not.pem");
  std::ofstream(not_pem) << "no certificate here\n";
  const std::string missing = (*dir)->File("missing.pem");
  // Nothing listens: a refusal naming a file came before any connection.
  auto nobody = BoundPort::Reserve();
  ASSERT_TRUE(nobody.ok());
  const std::string url = absl::StrCat("etcd://", nobody->address(), "/p");
  struct Case {
    std::string ca, cert, key, named;
  };
  const Case cases[] = {
      {missing, "", "", "etcd_tls_ca"},
      {not_pem, "", "", "etcd_tls_ca"},
      {ca->cert, missing, client->key, "etcd_tls_cert"},
      {ca->cert, not_pem, client->key, "etcd_tls_cert"},
      {ca->cert, client->cert, not_pem, "etcd_tls_key"},
      {ca->cert, client->cert, ca->key, "etcd_tls_key"},  // not the certificate's key
      {ca->cert, client->cert, "", "etcd_tls_key"},
      {ca->cert, "", client->key, "etcd_tls_cert"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(absl::StrCat("ca=", k.ca, " cert=", k.cert, " key=", k.key));
    gdrstore::ClusterOptions o;
    o.etcd_url = url;
    o.etcd_tls_ca = k.ca;
    o.etcd_tls_cert = k.cert;
    o.etcd_tls_key = k.key;
    auto c = gdrstore::ClusterClient::Open(o);
    EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
    EXPECT_TRUE(absl::StrContains(c.status().message(), k.named)) << c.status();
    EXPECT_FALSE(absl::StrContains(c.status().message(), nobody->address())) << c.status();
    for (const std::string& file : {k.ca, k.cert, k.key}) {
      if (file == missing || file == not_pem) {
        EXPECT_TRUE(absl::StrContains(c.status().message(), file)) << c.status();
      }
    }

    gdrstore_cluster_options co;
    gdrstore_cluster_options_init(&co);
    co.etcd_url = url.c_str();
    co.etcd_tls_ca = k.ca.empty() ? nullptr : k.ca.c_str();
    co.etcd_tls_cert = k.cert.empty() ? nullptr : k.cert.c_str();
    co.etcd_tls_key = k.key.empty() ? nullptr : k.key.c_str();
    gdrstore_cluster* handle = nullptr;
    char error[512] = "";
    EXPECT_EQ(gdrstore_cluster_open(&co, &handle, error, sizeof(error)),
              GDRSTORE_INVALID_ARGUMENT)
        << error;
    EXPECT_EQ(handle, nullptr);
    EXPECT_TRUE(absl::StrContains(error, k.named)) << error;
  }
  // etcd TLS with a members file: there is no etcd to take it.
  gdrstore::ClusterOptions file;
  file.members_file = (*dir)->File("members.json");
  file.etcd_tls_ca = ca->cert;
  auto c = gdrstore::ClusterClient::Open(file);
  EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "etcd_tls")) << c.status();
}

// A caller built against the header before etcd_tls_*: its struct_size ends at etcd_timeout_ms,
// and whatever lies past it is never read (here pointers to a file that does not exist, which
// would be refused if they were).
TEST(ClusterTlsFilesTest, AnOptionsStructOfTheLayoutBeforeEtcdTlsStillOpens) {
  if (absl::Status st = EtcdServer::Available(); !st.ok()) GTEST_SKIP() << st.message();
  auto etcd = EtcdServer::Create();
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const std::string url = (*etcd)->url("gdr-old");
  gdrstore_cluster_options o;
  gdrstore_cluster_options_init(&o);
  o.struct_size = offsetof(gdrstore_cluster_options, etcd_timeout_ms) + sizeof(uint32_t);
  o.etcd_url = url.c_str();
  o.etcd_tls_ca = o.etcd_tls_cert = o.etcd_tls_key = "/nonexistent/etcd-tls.pem";
  gdrstore_cluster* c = nullptr;
  char error[512] = "";
  ASSERT_EQ(gdrstore_cluster_open(&o, &c, error, sizeof(error)), GDRSTORE_OK) << error;
  gdrstore_cluster_close(c);
  // The whole struct reads them.
  o.struct_size = sizeof(o);
  EXPECT_EQ(gdrstore_cluster_open(&o, &c, error, sizeof(error)), GDRSTORE_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(error, "/nonexistent/etcd-tls.pem")) << error;
}

// deploy/kubernetes/examples/etcd.yaml's etcd, as three members on loopback: its TLS flags read
// from the example (the Secret's files swapped for the test's, the URLs' schemes its own), so
// peers and clients both show certificates of one CA. A daemon registers through the three
// with a client certificate, and a cluster client reading through each member alone sees it:
// each member serves, and what one was told reached the others over peer TLS.
TEST(EtcdExampleTest, ThreeMembersWithTheExamplesTlsFlagsServeDaemonsAndClients) {
  if (absl::Status st = EtcdServer::Available(); !st.ok()) GTEST_SKIP() << st.message();
  std::ifstream in(GDR_SOURCE_DIR "/deploy/kubernetes/examples/etcd.yaml");
  ASSERT_TRUE(in) << "cannot read examples/etcd.yaml";
  auto dir = TempDir::Create("etcd-example");
  ASSERT_TRUE(dir.ok()) << dir.status();
  TestPki pki((*dir)->path());
  auto ca = pki.MakeCa("etcd-example");
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto peer = pki.Issue(*ca, "etcd-peer", TestPki::Use::kPeer);
  auto client = pki.Issue(*ca, "gdrstore", TestPki::Use::kClient, "DNS:gdrstore");
  ASSERT_TRUE(peer.ok() && client.ok()) << peer.status() << client.status();
  // The Secret etcd-tls's keys, mounted at /etc/etcd/tls in the example.
  const std::vector<std::pair<std::string, std::string>> secret = {
      {"/etc/etcd/tls/ca.crt", ca->cert},
      {"/etc/etcd/tls/tls.crt", peer->cert},
      {"/etc/etcd/tls/tls.key", peer->key}};
  std::vector<std::string> tls_flags;
  std::set<std::string> names;
  std::string client_scheme, peer_scheme;
  for (std::string line; std::getline(in, line);) {
    absl::string_view flag = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&flag, "- --")) continue;
    const std::string f = absl::StrCat("--", flag);
    const std::string name = f.substr(0, f.find('='));
    const std::string value = f.find('=') == std::string::npos ? "" : f.substr(f.find('=') + 1);
    if (name == "--listen-client-urls") client_scheme = value.substr(0, value.find("://"));
    if (name == "--listen-peer-urls") peer_scheme = value.substr(0, value.find("://"));
    if (absl::StrContains(value, "/etc/etcd/tls/") || absl::EndsWith(name, "client-cert-auth")) {
      tls_flags.push_back(absl::StrReplaceAll(f, secret));
      names.insert(name);
    }
  }
  // TLS both ways: what the example must keep saying for this test to mean anything.
  EXPECT_EQ(client_scheme, "https");
  EXPECT_EQ(peer_scheme, "https");
  const std::set<std::string> both_ways = {
      "--client-cert-auth",      "--trusted-ca-file",      "--cert-file",      "--key-file",
      "--peer-client-cert-auth", "--peer-trusted-ca-file", "--peer-cert-file", "--peer-key-file"};
  EXPECT_EQ(names, both_ways);
  for (const std::string& f : tls_flags) {
    EXPECT_FALSE(absl::StrContains(f, "/etc/etcd/")) << f << ": a file the Secret does not hold";
  }

  std::vector<BoundPort> ports;
  for (int i = 0; i < 6; ++i) {
    auto p = BoundPort::Reserve();
    ASSERT_TRUE(p.ok()) << p.status();
    ports.push_back(std::move(*p));
  }
  std::vector<std::string> endpoints, peers, initial;
  for (int i = 0; i < 3; ++i) {
    endpoints.push_back(ports[2 * i].address());
    peers.push_back(absl::StrCat(peer_scheme, "://", ports[2 * i + 1].address()));
    initial.push_back(absl::StrCat("e", i, "=", peers.back()));
  }
  for (BoundPort& p : ports) p.Release();
  std::vector<std::unique_ptr<ChildProcess>> members;
  for (int i = 0; i < 3; ++i) {
    const std::string name = absl::StrCat("e", i);
    const std::string url = absl::StrCat(client_scheme, "://", endpoints[i]);
    std::vector<std::string> argv = {EtcdServer::kBinary,
                                     "--name=" + name,
                                     "--data-dir=" + (*dir)->File(name),
                                     "--listen-client-urls=" + url,
                                     "--advertise-client-urls=" + url,
                                     "--listen-peer-urls=" + peers[i],
                                     "--initial-advertise-peer-urls=" + peers[i],
                                     "--initial-cluster=" + absl::StrJoin(initial, ","),
                                     "--initial-cluster-state=new",
                                     "--initial-cluster-token=gdrstore-etcd"};
    argv.insert(argv.end(), tls_flags.begin(), tls_flags.end());
    auto e = ChildProcess::Spawn(argv, (*dir)->File(name + ".out"), (*dir)->File(name + ".err"));
    ASSERT_TRUE(e.ok()) << e.status();
    members.push_back(std::move(*e));
  }
  auto logs = [&] {
    std::string all;
    for (int i = 0; i < 3; ++i) {
      std::ifstream err((*dir)->File(absl::StrCat("e", i, ".err")));
      std::stringstream text;
      text << err.rdbuf();
      absl::StrAppend(&all, "\n---- e", i, " ----\n", text.str());
    }
    return all;
  };

  const std::string url = absl::StrCat("etcd://", absl::StrJoin(endpoints, ","), "/gdr-example");
  auto d = DaemonProcess::Start({"--cluster", url, "--cluster-id", "m0", "--cluster-tls-ca",
                                 ca->cert, "--cluster-tls-cert", client->cert,
                                 "--cluster-tls-key", client->key, "--volume", "vol0=4MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  for (const std::string& endpoint : endpoints) {
    gdrstore::ClusterOptions o;
    o.etcd_url = absl::StrCat("etcd://", endpoint, "/gdr-example");
    o.etcd_tls_ca = ca->cert;
    o.etcd_tls_cert = client->cert;
    o.etcd_tls_key = client->key;
    absl::Status last;
    const bool seen = PollUntil(
        [&] {
          auto c = gdrstore::ClusterClient::Open(o);
          last = c.status();
          if (!c.ok()) return false;
          for (const auto& m : (*c)->Members()) {
            if (m.present && m.entry.id() == "m0") return true;
          }
          return false;
        },
        absl::Seconds(30), absl::Milliseconds(200));
    EXPECT_TRUE(seen) << endpoint << ": " << last << "\ndaemon: " << (*d)->Stderr() << logs();
  }
}

}  // namespace
}  // namespace gdr::integ
