// TLS and mTLS on the gRPC port, end to end: real gdrstored processes serving certificates that
// `openssl` made for the test, real libgdrclient and gdrctl clients. Verified ops over TLS; clients
// trusting another CA, presenting no or a foreign client certificate, or speaking plaintext are
// refused; an expired server certificate is refused by clients; certificates rotate (file change,
// SIGHUP) while a Stream keeps running, and a broken replacement keeps the old set; a non-loopback
// listen address needs TLS, tokens or --insecure; the watchdog's in-process Ping keeps running
// under mTLS.
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "gdrstore/gdrstore.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/notify_listener.h"
#include "tests/integration/test_pki.h"
#include "tests/integration/verified_ops.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kVolumeSize = 16 << 20;

// Replaces `to` with a copy of `from` the way certificate tools do: a new file renamed over it.
void InstallFile(const std::string& from, const std::string& to) {
  const std::string tmp = to + ".new";
  std::filesystem::copy_file(from, tmp, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::rename(tmp, to);
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto dir = TempDir::Create("gdr-tls");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir).release();
    // The daemons stage their certificates under $TMPDIR: inside the test's directory, so that the
    // ones a test SIGKILLs leave nothing behind.
    ::setenv("TMPDIR", dir_->path().c_str(), 1);
    TestPki pki(dir_->path());
    auto ca = [&](const std::string& name, CertFiles* out) {
      auto c = pki.MakeCa(name);
      ASSERT_TRUE(c.ok()) << c.status();
      *out = *c;
    };
    auto issue = [&](const CertFiles& by, const std::string& name, TestPki::Use use,
                     const std::string& san, bool expired, CertFiles* out) {
      auto c = pki.Issue(by, name, use, san, expired);
      ASSERT_TRUE(c.ok()) << c.status();
      *out = *c;
    };
    ca("first", &ca1_);
    ca("second", &ca2_);
    ca("foreign", &foreign_ca_);
    issue(ca1_, "server-first", TestPki::Use::kServer, "", false, &server1_);
    issue(ca2_, "server-second", TestPki::Use::kServer, "", false, &server2_);
    issue(ca1_, "server-expired", TestPki::Use::kServer, "", true, &expired_);
    issue(ca1_, "client-a", TestPki::Use::kClient, "URI:spiffe://gdrstore.test/client-a", false,
          &client_a_);
    issue(foreign_ca_, "client-foreign", TestPki::Use::kClient, "DNS:client-foreign", false,
          &client_foreign_);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::string Pem(const std::string& path) { return ReadFileOrEmpty(path); }

  // Credentials of the harness's readiness check for a daemon serving a CA's certificate.
  static std::shared_ptr<grpc::ChannelCredentials> HealthCredentials(const CertFiles& ca,
                                                                     const CertFiles* client) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = Pem(ca.cert);
    if (client != nullptr) {
      o.pem_cert_chain = Pem(client->cert);
      o.pem_private_key = Pem(client->key);
    }
    return grpc::SslCredentials(o);
  }

  static std::unique_ptr<DaemonProcess> StartDaemon(std::vector<std::string> args,
                                                    const CertFiles& ca,
                                                    const CertFiles* client = nullptr) {
    DaemonStart how;
    how.credentials = HealthCredentials(ca, client);
    args.insert(args.begin(), {"--volume", absl::StrCat("vol0=", kVolumeSize)});
    auto d = DaemonProcess::Start(args, how);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }

  static gdrstore::ClientOptions Options(const DaemonProcess& d, const std::string& ca,
                                         const CertFiles* client = nullptr) {
    gdrstore::ClientOptions o;
    o.daemon_address = d.address();
    o.tls_ca = ca;
    if (client != nullptr) {
      o.tls_cert = client->cert;
      o.tls_key = client->key;
    }
    return o;
  }

  // GetInfo through a fresh client (a new connection, a new handshake).
  static absl::StatusOr<gdrstore::v1::GetInfoResponse> FreshGetInfo(
      const gdrstore::ClientOptions& o) {
    auto c = gdrstore::Client::Connect(o);
    if (!c.ok()) return c.status();
    return (*c)->GetInfo();
  }

  // A Write and a Read through `client`, each checked byte for byte.
  static void VerifiedOps(gdrstore::Client& client) {
    auto buf = client.AllocateBuffer(2 << 20);
    ASSERT_TRUE(buf.ok()) << buf.status();
    SaltMap salts(kVolumeSize);
    gdrstore::Extent e{"vol0", 4097, 1 << 20};
    ASSERT_TRUE(VerifiedWrite(client, **buf, kGuardBytes, e, salts).ok());
    absl::Status r = VerifiedRead(client, **buf, kGuardBytes, kGuardBytes, e, 7, &salts);
    ASSERT_TRUE(r.ok()) << r;
  }

  static TempDir* dir_;
  static CertFiles ca1_, ca2_, foreign_ca_, server1_, server2_, expired_, client_a_,
      client_foreign_;
};

TempDir* TlsTest::dir_ = nullptr;
CertFiles TlsTest::ca1_, TlsTest::ca2_, TlsTest::foreign_ca_, TlsTest::server1_, TlsTest::server2_,
    TlsTest::expired_, TlsTest::client_a_, TlsTest::client_foreign_;

TEST_F(TlsTest, VerifiedOpsOverTlsAndGetInfoSaysTls) {
  auto d = StartDaemon({"--tls-cert", server1_.cert, "--tls-key", server1_.key}, ca1_);
  ASSERT_NE(d, nullptr);
  auto c = gdrstore::Client::Connect(Options(*d, ca1_.cert));
  ASSERT_TRUE(c.ok()) << c.status();
  VerifiedOps(**c);
  auto info = (*c)->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->tls().enabled());
  EXPECT_FALSE(info->tls().client_certificate_required());
  EXPECT_TRUE(absl::StrContains(info->tls().certificate_subject(), "CN=server-first"))
      << info->tls().certificate_subject();
  EXPECT_TRUE(absl::StrContains(d->Stderr(), "TLS, certificate CN=server-first")) << d->Stderr();
}

TEST_F(TlsTest, ClientTrustingAnotherCaIsRefused) {
  auto d = StartDaemon({"--tls-cert", server1_.cert, "--tls-key", server1_.key}, ca1_);
  ASSERT_NE(d, nullptr);
  auto info = FreshGetInfo(Options(*d, ca2_.cert));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable) << info.status();
  // The right CA still works on the same daemon: the refusal was the trust, not the daemon.
  EXPECT_TRUE(FreshGetInfo(Options(*d, ca1_.cert)).ok());
}

TEST_F(TlsTest, ExpiredServerCertificateIsServedWithAWarningAndRefusedByClients) {
  DaemonStart how;
  how.health_check = false;  // no client accepts this certificate
  auto d = DaemonProcess::Start(
      {"--volume", "vol0=4MiB", "--tls-cert", expired_.cert, "--tls-key", expired_.key}, how);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(absl::StrContains((*d)->Stderr(), "certificate EXPIRED 2020-01-02"))
      << (*d)->Stderr();
  auto info = FreshGetInfo(Options(**d, ca1_.cert));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable) << info.status();
}

TEST_F(TlsTest, PlaintextClientFailsSayingTlsIsProbablyNeeded) {
  auto d = StartDaemon({"--tls-cert", server1_.cert, "--tls-key", server1_.key}, ca1_);
  ASSERT_NE(d, nullptr);
  gdrstore::ClientOptions o;
  o.daemon_address = d->address();
  auto info = FreshGetInfo(o);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable) << info.status();
  EXPECT_TRUE(absl::StrContains(info.status().message(), "probably requires TLS")) << info.status();
}

TEST_F(TlsTest, MtlsServesTheRightClientCertificateOnly) {
  auto d = StartDaemon(
      {"--tls-cert", server1_.cert, "--tls-key", server1_.key, "--tls-client-ca", ca1_.cert}, ca1_,
      &client_a_);
  ASSERT_NE(d, nullptr);
  auto c = gdrstore::Client::Connect(Options(*d, ca1_.cert, &client_a_));
  ASSERT_TRUE(c.ok()) << c.status();
  VerifiedOps(**c);
  auto info = (*c)->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->tls().client_certificate_required());

  auto none = FreshGetInfo(Options(*d, ca1_.cert));
  ASSERT_FALSE(none.ok()) << "a client without a certificate was served";
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable) << none.status();

  auto foreign = FreshGetInfo(Options(*d, ca1_.cert, &client_foreign_));
  ASSERT_FALSE(foreign.ok()) << "a certificate of another CA was accepted";
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kUnavailable) << foreign.status();
}

TEST_F(TlsTest, BadFilesStopTheDaemonNamingTheFile) {
  const std::string garbage = dir_->File("garbage.pem");
  std::ofstream(garbage) << "not a certificate\n";
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--tls-cert", server1_.cert, "--tls-key", server2_.key},
       absl::StrCat("--tls-key ", server2_.key, " is not the key of the certificate")},
      {{"--tls-cert", garbage, "--tls-key", server1_.key},
       absl::StrCat("--tls-cert ", garbage, ": no PEM certificate")},
      {{"--tls-cert", server1_.cert, "--tls-key", garbage},
       absl::StrCat("--tls-key ", garbage, ": no unencrypted PEM private key")},
      {{"--tls-cert", dir_->File("absent.pem"), "--tls-key", server1_.key},
       dir_->File("absent.pem")},
      {{"--tls-cert", server1_.cert, "--tls-key", server1_.key, "--tls-client-ca", garbage},
       absl::StrCat("--tls-client-ca ", garbage, ": no PEM certificate")},
      {{"--tls-cert", server1_.cert}, "--tls-cert and --tls-key go together"},
  };
  int n = 0;
  for (const Case& c : cases) {
    std::vector<std::string> argv = {GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--volume",
                                     "vol0=1MiB"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    auto r = RunProcess(argv, dir_->path(), absl::StrCat("bad", n++), absl::Seconds(30));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_code, 1) << r->Describe();
    EXPECT_TRUE(absl::StrContains(r->err, c.says)) << "want '" << c.says << "' in " << r->err;
  }
}

// One Stream carries Writes (store -> buffer, each checked against the volume's pattern) the whole
// time the daemon's certificate is replaced three times.
class StreamUnderRotation {
 public:
  explicit StreamUnderRotation(gdrstore::Client* client) : client_(client) {}
  ~StreamUnderRotation() { Stop(); }
  absl::Status Start() {
    auto buf = client_->AllocateBuffer(64 << 10);
    if (!buf.ok()) return buf.status();
    buffer_ = std::move(*buf);
    auto s = client_->OpenStream();
    if (!s.ok()) return s.status();
    stream_ = std::move(*s);
    thread_ = std::thread([this] { Run(); });
    return absl::OkStatus();
  }
  // Waits until at least `n` more ops have completed since the call.
  bool AdvanceBy(uint64_t n) {
    const uint64_t target = ok_.load() + n;
    return PollUntil([&] { return ok_.load() >= target || failed_.load(); }, absl::Seconds(60)) &&
           !failed_.load();
  }
  // Stops, and the first failure ("" when none).
  std::string Stop() {
    if (!thread_.joinable()) return failure_;
    stop_ = true;
    thread_.join();
    absl::Status closed = stream_->Close();
    if (failure_.empty() && !closed.ok()) failure_ = closed.ToString();
    return failure_;
  }
  uint64_t ok() const { return ok_.load(); }

 private:
  void Run() {
    const uint64_t seed = PatternSeed("vol0");
    for (uint64_t i = 0; !stop_; ++i) {
      const uint64_t offset = (i * 4096 + i) % (kVolumeSize - buffer_->size());
      std::promise<absl::StatusOr<gdrstore::OpResult>> done;
      stream_->Submit(gdrstore::OpKind::kWrite, {"vol0", offset, buffer_->size()}, *buffer_, 0,
                      [&done](absl::StatusOr<gdrstore::OpResult> r) { done.set_value(r); });
      absl::StatusOr<gdrstore::OpResult> r = done.get_future().get();
      if (!r.ok()) {
        failure_ = absl::StrCat("op ", i, ": ", r.status().ToString());
        failed_.store(true);
        return;
      }
      if (auto bad = PatternMismatch(seed, offset, {buffer_->data(), buffer_->size()})) {
        failure_ = absl::StrCat("op ", i, ": byte ", *bad, " is not the volume's");
        failed_.store(true);
        return;
      }
      ok_.fetch_add(1);
    }
  }

  gdrstore::Client* client_;
  std::unique_ptr<gdrstore::Buffer> buffer_;
  std::unique_ptr<gdrstore::OpStream> stream_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> ok_{0};
  std::atomic<bool> failed_{false};
  std::string failure_;  // written by the thread before it sets failed_; read after join
};

TEST_F(TlsTest, CertificatesRotateWhileAStreamRunsAndABrokenSetIsRefused) {
  // The daemon serves cert.pem/key.pem from a config file, so SIGHUP can also move the paths.
  const std::string cert = dir_->File("rot-cert.pem"), key = dir_->File("rot-key.pem");
  InstallFile(server1_.cert, cert);
  InstallFile(server1_.key, key);
  const std::string conf = dir_->File("rot.conf");
  auto write_conf = [&](const std::string& c, const std::string& k) {
    std::ofstream(conf, std::ios::trunc)
        << "tls-cert = \"" << c << "\"\ntls-key = \"" << k << "\"\n";
  };
  write_conf(cert, key);
  auto d = StartDaemon({"--config", conf}, ca1_);
  ASSERT_NE(d, nullptr);
  auto trusting = [&](const CertFiles& ca) { return FreshGetInfo(Options(*d, ca.cert)); };

  auto client = gdrstore::Client::Connect(Options(*d, ca1_.cert));
  ASSERT_TRUE(client.ok()) << client.status();
  StreamUnderRotation stream(client->get());
  ASSERT_TRUE(stream.Start().ok());
  ASSERT_TRUE(stream.AdvanceBy(20)) << stream.Stop();

  // 1. The files change (second CA): the daemon notices, new connections get the new set.
  InstallFile(server2_.key, key);
  InstallFile(server2_.cert, cert);
  ASSERT_TRUE(PollUntil([&] { return trusting(ca2_).ok(); }, absl::Seconds(30))) << d->Stderr();
  EXPECT_FALSE(trusting(ca1_).ok()) << "the first CA's certificate is still served";
  ASSERT_TRUE(stream.AdvanceBy(20)) << stream.Stop();
  EXPECT_TRUE(absl::StrContains(d->Stderr(), "TLS (file change): now serving CN=server-second"))
      << d->Stderr();

  // 2. SIGHUP with the config pointing at other files (the first CA's again).
  write_conf(server1_.cert, server1_.key);
  ASSERT_TRUE(d->Signal(SIGHUP).ok());
  ASSERT_TRUE(PollUntil([&] { return trusting(ca1_).ok(); }, absl::Seconds(30))) << d->Stderr();
  EXPECT_FALSE(trusting(ca2_).ok()) << "the second CA's certificate is still served";
  ASSERT_TRUE(stream.AdvanceBy(20)) << stream.Stop();
  EXPECT_TRUE(absl::StrContains(d->Stderr(), "TLS (SIGHUP): now serving CN=server-first"))
      << d->Stderr();

  // 3. A broken replacement: a certificate whose key is not the one beside it, then garbage. Both
  // are refused with a log line; the served set stays.
  write_conf(cert, key);  // rot-*.pem hold the second CA's pair
  InstallFile(server1_.key,
              key);  // key of server-first beside server-second's certificate
  ASSERT_TRUE(d->Signal(SIGHUP).ok());
  ASSERT_TRUE(PollUntil([&] { return absl::StrContains(d->Stderr(), "is not the key of"); },
                        absl::Seconds(30)))
      << d->Stderr();
  std::ofstream(cert + ".new") << "-----BEGIN CERTIFICATE-----\ngarbage\n";
  std::filesystem::rename(cert + ".new", cert);
  ASSERT_TRUE(PollUntil(
      [&] {
        const std::string err = d->Stderr();
        return absl::StrContains(err, "a PEM certificate does not parse") ||
               absl::StrContains(err, ": no PEM certificate");
      },
      absl::Seconds(30)))
      << d->Stderr();
  EXPECT_TRUE(absl::StrContains(d->Stderr(), "refused, still serving CN=server-first"))
      << d->Stderr();
  auto info = trusting(ca1_);
  ASSERT_TRUE(info.ok()) << info.status() << "\n" << d->Stderr();
  EXPECT_TRUE(absl::StrContains(info->tls().certificate_subject(), "CN=server-first"));
  EXPECT_EQ(info->tls().reloads(), 2u);
  EXPECT_GE(info->tls().refused(), 2u);
  EXPECT_FALSE(trusting(ca2_).ok());

  ASSERT_TRUE(stream.AdvanceBy(20)) << stream.Stop();
  EXPECT_EQ(stream.Stop(), "");
  EXPECT_TRUE(d->Running());
}

// The staging directory holds a copy of the private key: removed at a clean exit, and the one a
// killed daemon left is removed by the next daemon that starts.
TEST_F(TlsTest, StagedKeyCopiesDoNotOutliveTheirDaemon) {
  // A $TMPDIR of this test's own, which the other tests' killed daemons have not used.
  const std::string tmp = dir_->File("staging-test");
  std::filesystem::create_directory(tmp);
  ::setenv("TMPDIR", tmp.c_str(), 1);
  absl::Cleanup restore = [] { ::setenv("TMPDIR", dir_->path().c_str(), 1); };
  auto staged = [&tmp] {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(tmp)) {
      if (e.path().filename().string().rfind("gdrstored-tls.", 0) == 0) {
        out.push_back(e.path().string());
      }
    }
    return out;
  };
  ASSERT_TRUE(staged().empty()) << staged().front();
  auto clean = StartDaemon({"--tls-cert", server1_.cert, "--tls-key", server1_.key}, ca1_);
  ASSERT_NE(clean, nullptr);
  ASSERT_EQ(staged().size(), 1u);
  auto st = clean->Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_TRUE(staged().empty()) << "left after a clean exit: " << staged().front();

  auto killed = StartDaemon({"--tls-cert", server1_.cert, "--tls-key", server1_.key}, ca1_);
  ASSERT_NE(killed, nullptr);
  const std::vector<std::string> left = staged();
  ASSERT_EQ(left.size(), 1u);
  ASSERT_TRUE(killed->Signal(SIGKILL).ok());
  ASSERT_TRUE(killed->Wait(absl::Seconds(30)).ok());
  EXPECT_TRUE(std::filesystem::exists(left[0] + "/current/key.pem"));
  auto next = StartDaemon({"--tls-cert", server1_.cert, "--tls-key", server1_.key}, ca1_);
  ASSERT_NE(next, nullptr);
  EXPECT_FALSE(std::filesystem::exists(left[0])) << left[0] << " survived its daemon";
  EXPECT_EQ(staged().size(), 1u);
}

// The C ABI's options grew TLS fields at the end: a caller built against the older header (a
// smaller struct_size) still connects, and its struct is not read past its end.
TEST_F(TlsTest, CAbiOptionsTakeTlsAndOlderStructsStillWork) {
  auto d = StartDaemon({"--tls-cert", server1_.cert, "--tls-key", server1_.key,
                        "--tls-client-ca", ca1_.cert},
                       ca1_, &client_a_);
  ASSERT_NE(d, nullptr);
  const std::string address = d->address();
  gdrstore_client_options o;
  gdrstore_client_options_init(&o);
  o.daemon_address = address.c_str();
  o.rpc_timeout_ms = 10000;
  o.tls_ca = ca1_.cert.c_str();
  o.tls_cert = client_a_.cert.c_str();
  o.tls_key = client_a_.key.c_str();
  gdrstore_client* c = nullptr;
  char err[512] = "";
  ASSERT_EQ(gdrstore_client_open(&o, &c, err, sizeof(err)), GDRSTORE_OK) << err;
  char* json = nullptr;
  ASSERT_EQ(gdrstore_info_json(c, &json), GDRSTORE_OK) << gdrstore_error(c);
  EXPECT_TRUE(absl::StrContains(json, "\"client_certificate_required\":true") ||
              absl::StrContains(json, "\"client_certificate_required\": true"))
      << json;
  gdrstore_free(json);
  gdrstore_client_close(c);

  // The first header's struct ends at rpc_timeout_ms: the TLS fields behind it are garbage
  // here and must not be read, so this client speaks plaintext and the TLS daemon refuses it.
  o.struct_size = offsetof(gdrstore_client_options, rpc_timeout_ms) + sizeof(uint32_t);
  o.tls_ca = reinterpret_cast<const char*>(0x1);
  o.tls_cert = reinterpret_cast<const char*>(0x1);
  o.tls_key = reinterpret_cast<const char*>(0x1);
  o.tls_server_name = reinterpret_cast<const char*>(0x1);
  ASSERT_EQ(gdrstore_client_open(&o, &c, err, sizeof(err)), GDRSTORE_OK) << err;
  EXPECT_EQ(gdrstore_info_json(c, &json), GDRSTORE_UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(gdrstore_error(c), "probably requires TLS")) << gdrstore_error(c);
  gdrstore_client_close(c);
}

// ---- who may listen where ----

TEST_F(TlsTest, NonLoopbackListenNeedsTlsTokensOrInsecure) {
  auto open = RunProcess({GDR_GDRSTORED_BIN, "--listen", "0.0.0.0:0", "--volume", "vol0=1MiB"},
                         dir_->path(), "open", absl::Seconds(30));
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(open->exit_code, 1) << open->Describe();
  for (const char* way : {"--tls-cert", "--token-file", "--insecure", "0.0.0.0:0"}) {
    EXPECT_TRUE(absl::StrContains(open->err, way)) << "no '" << way << "' in " << open->err;
  }

  const std::string tokens = dir_->File("listen.tokens");
  std::ofstream(tokens) << "gdrstore-listen-test-token-0123456789\n";
  ::chmod(tokens.c_str(), 0600);
  struct Way {
    std::vector<std::string> args;
    std::shared_ptr<grpc::ChannelCredentials> health;
  };
  const std::vector<Way> ways = {
      {{"--insecure"}, nullptr},
      {{"--token-file", tokens}, nullptr},
      {{"--tls-cert", server1_.cert, "--tls-key", server1_.key}, HealthCredentials(ca1_, nullptr)},
  };
  for (const Way& w : ways) {
    DaemonStart how;
    how.listen = "0.0.0.0:0";  // bound on every interface; the test only talks
                               // to 127.0.0.1
    how.credentials = w.health;
    std::vector<std::string> args = {"--volume", "vol0=1MiB"};
    args.insert(args.end(), w.args.begin(), w.args.end());
    auto d = DaemonProcess::Start(args, how);
    ASSERT_TRUE(d.ok()) << w.args.front() << ": " << d.status();
    EXPECT_TRUE((*d)->Running());
  }
  // Loopback needs none of them.
  auto local = DaemonProcess::Start({"--volume", "vol0=1MiB"});
  EXPECT_TRUE(local.ok()) << local.status();
}

// ---- gdrctl ----

TEST_F(TlsTest, GdrctlWithTlsFlagsDoesVerifiedTransfersOverMtls) {
  auto d = StartDaemon(
      {"--tls-cert", server1_.cert, "--tls-key", server1_.key, "--tls-client-ca", ca1_.cert}, ca1_,
      &client_a_);
  ASSERT_NE(d, nullptr);
  int n = 0;
  auto gdrctl = [&](std::vector<std::string> args, std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {GDR_GDRCTL_BIN, "--daemon", d->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunProcess(argv, dir_->path(), absl::StrCat("gdrctl", n++), absl::Seconds(60));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ProcessResult{};
  };
  const std::vector<std::string> tls = {"--tls-ca",     ca1_.cert,   "--tls-cert",
                                        client_a_.cert, "--tls-key", client_a_.key};
  for (const char* op : {"write", "read"}) {
    std::vector<std::string> args = tls;
    args.insert(args.end(), {op, "-s", "1MiB", "--verify"});
    ProcessResult r = gdrctl(args);
    EXPECT_EQ(r.exit_code, 0) << op << ": " << r.Describe();
  }
  std::vector<std::string> info_args = tls;
  info_args.push_back("info");
  ProcessResult info = gdrctl(info_args);
  EXPECT_EQ(info.exit_code, 0) << info.Describe();
  EXPECT_TRUE(absl::StrContains(info.out, "mTLS (client certificates required)")) << info.out;
  EXPECT_TRUE(absl::StrContains(info.out, "CN=server-first")) << info.out;
  ProcessResult plain = gdrctl({"info"});
  EXPECT_EQ(plain.exit_code, 1) << plain.Describe();
  EXPECT_TRUE(absl::StrContains(plain.err, "UNAVAILABLE")) << plain.err;
  EXPECT_TRUE(absl::StrContains(plain.err, "--tls-ca")) << plain.err;
  ProcessResult bad = gdrctl(
      {"--tls-ca", ca1_.cert, "--tls-cert", client_a_.cert, "--tls-key", server1_.key, "info"});
  EXPECT_NE(bad.exit_code, 0) << bad.Describe();
  EXPECT_TRUE(absl::StrContains(bad.err, "is not the key of the certificate")) << bad.err;
}

// The watchdog's probe calls the daemon's own Ping through the in-process channel, which needs no
// handshake: under mTLS the pings go on.
TEST_F(TlsTest, WatchdogPingsContinueUnderMtls) {
  auto notify = NotifyListener::Bind(dir_->File("notify.sock"));
  ASSERT_TRUE(notify.ok()) << notify.status();
  NotifyListener& sd = **notify;
  auto child = ChildProcess::SpawnWithEnv(
      {GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--volume", "vol0=4MiB", "--tls-cert",
       server1_.cert, "--tls-key", server1_.key, "--tls-client-ca", ca1_.cert},
      {"NOTIFY_SOCKET=" + sd.path(), "WATCHDOG_USEC=1000000"}, dir_->File("wd.stdout"),
      dir_->File("wd.stderr"));
  ASSERT_TRUE(child.ok()) << child.status();
  const int ready = sd.WaitFor("READY=1", 0, absl::Seconds(60));
  ASSERT_GE(ready, 0) << ReadFileOrEmpty((*child)->stderr_path());
  int seen = ready;
  for (int i = 0; i < 3; ++i) {
    seen = sd.WaitFor("WATCHDOG=1", seen + 1, absl::Seconds(10));
    ASSERT_GE(seen, 0) << "watchdog ping " << i << " missing; stderr:\n"
                       << ReadFileOrEmpty((*child)->stderr_path());
  }
  ASSERT_TRUE((*child)->Signal(SIGTERM).ok());
  auto st = (*child)->Wait(absl::Seconds(30));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0");
}

}  // namespace
}  // namespace gdr::integ
