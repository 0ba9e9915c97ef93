// Grants carried by mTLS identities, end to end: a real gdrstored serving mTLS with certificates
// `openssl` made for the test, and a token file whose san: lines grant volumes to client
// certificates by subjectAltName (a URI and a DNS name) beside a token line. A certificate's line
// applies when no token is sent, a sent token is judged alone, an unlisted certificate is
// UNAUTHENTICATED, san: lines match nothing unless the daemon verifies client certificates, and a
// SIGHUP changes the grants of an identity's open Stream.
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <span>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/test_pki.h"
#include "tests/integration/verified_ops.h"

namespace gdr::integ {
namespace {

namespace v1 = gdrstore::v1;
using gdrstore::OpKind;

constexpr uint64_t kVolumeSize = 4 << 20;
constexpr uint64_t kLen = 64 << 10;
constexpr char kTokenT[] = "mtls-grants-test-token-t-0123456789";
constexpr char kWrongToken[] = "mtls-grants-test-wrong-token-012345";

std::string TokenFile(const std::string& a_grants) {
  return absl::StrCat("# identities by certificate, and one token\n",
                      "san:spiffe://test/a name=a ", a_grants, "\n",
                      "san:b.test put=v2\n",
                      kTokenT, " name=t get=v2\n");
}

void WriteTokenFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".new";
  std::ofstream(tmp, std::ios::trunc) << text;
  ::chmod(tmp.c_str(), 0600);
  std::rename(tmp.c_str(), path.c_str());
}

std::vector<std::string> VolumeNames(const v1::GetInfoResponse& info) {
  std::vector<std::string> out;
  for (const auto& v : info.volumes()) out.push_back(v.name());
  return out;
}

class MtlsGrantsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto dir = TempDir::Create("gdr-mtls-grants");
    ASSERT_TRUE(dir.ok()) << dir.status();
    pki_dir_ = std::move(*dir).release();
    // The daemons stage their certificates under $TMPDIR: inside the test's directory.
    ::setenv("TMPDIR", pki_dir_->path().c_str(), 1);
    TestPki pki(pki_dir_->path());
    auto ca = pki.MakeCa("grants");
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = *ca;
    auto issue = [&](const std::string& name, TestPki::Use use, const std::string& san,
                     CertFiles* out) {
      auto c = pki.Issue(ca_, name, use, san);
      ASSERT_TRUE(c.ok()) << c.status();
      *out = *c;
    };
    issue("server", TestPki::Use::kServer, "", &server_);
    issue("client-a", TestPki::Use::kClient, "URI:spiffe://test/a", &client_a_);
    issue("client-b", TestPki::Use::kClient, "DNS:b.test", &client_b_);
    issue("client-c", TestPki::Use::kClient, "URI:spiffe://test/c,DNS:c.test", &client_c_);
  }
  static void TearDownTestSuite() {
    delete pki_dir_;
    pki_dir_ = nullptr;
  }

  void SetUp() override {
    auto dir = TempDir::Create("gdr-mtls-grants-daemon");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
    tokens_ = dir_->File("daemon.tokens");
    WriteTokenFile(tokens_, TokenFile("get=v1"));
  }

  void TearDown() override {
    if (daemon_ == nullptr) return;
    const std::string log = daemon_->Stderr();
    for (const char* t : {kTokenT, kWrongToken}) {
      EXPECT_FALSE(absl::StrContains(log, t)) << "a token was logged";
    }
  }

  // mutual: --tls-client-ca (the daemon verifies client certificates); else TLS only.
  void StartDaemon(bool mutual) {
    std::vector<std::string> args = {"--volume",     "v1=4MiB",    "--volume",  "v2=4MiB",
                                     "--tls-cert",   server_.cert, "--tls-key", server_.key,
                                     "--token-file", tokens_};
    if (mutual) args.insert(args.end(), {"--tls-client-ca", ca_.cert});
    // The readiness health check needs no credential, only a certificate the daemon accepts.
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadFileOrEmpty(ca_.cert);
    if (mutual) {
      o.pem_cert_chain = ReadFileOrEmpty(client_c_.cert);
      o.pem_private_key = ReadFileOrEmpty(client_c_.key);
    }
    DaemonStart how;
    how.credentials = grpc::SslCredentials(o);
    auto d = DaemonProcess::Start(args, how);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  // A client presenting `cert` (nullptr: none) and `token` ("" : none).
  std::unique_ptr<gdrstore::Client> Connect(const CertFiles* cert, const std::string& token) {
    gdrstore::ClientOptions o;
    o.daemon_address = daemon_->address();
    o.tls_ca = ca_.cert;
    if (cert != nullptr) {
      o.tls_cert = cert->cert;
      o.tls_key = cert->key;
    }
    o.token = token;
    auto c = gdrstore::Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  std::unique_ptr<gdrstore::Buffer> Allocate(gdrstore::Client& c, size_t n) {
    auto b = c.AllocateBuffer(n);
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  }

  // A put (the Read RPC) of the (volume, salt) pattern into [offset, +kLen).
  static absl::Status Put(gdrstore::Client& c, const gdrstore::Buffer& buf,
                          const std::string& volume, uint64_t offset, uint64_t salt) {
    PatternFill(PatternSeed(volume, salt), offset, std::span<std::byte>(buf.data(), kLen));
    return c.Read({volume, offset, kLen}, buf).status();
  }

  // A get of [offset, +kLen) through `c`, checked against `salt`'s pattern byte for byte.
  absl::Status VerifiedGet(gdrstore::Client& c, const std::string& volume, uint64_t offset,
                           uint64_t salt) {
    auto buf = Allocate(c, kLen + 2 * kGuardBytes);
    if (buf == nullptr) return absl::InternalError("no buffer");
    SaltMap salts(kVolumeSize);
    salts.Assign(offset, kLen, salt);
    return VerifiedWrite(c, *buf, kGuardBytes, {volume, offset, kLen}, salts);
  }

  // The daemon still serves: a fresh mTLS client with token t gets verified bytes of v2.
  void ExpectStillServing() {
    ASSERT_TRUE(daemon_->Running()) << daemon_->Stderr();
    auto t = Connect(&client_c_, kTokenT);
    ASSERT_NE(t, nullptr);
    absl::Status s = VerifiedGet(*t, "v2", 3 * kLen, 0);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE(daemon_->Running()) << daemon_->Stderr();
  }

  static TempDir* pki_dir_;
  static CertFiles ca_, server_, client_a_, client_b_, client_c_;
  std::unique_ptr<TempDir> dir_;
  std::string tokens_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TempDir* MtlsGrantsTest::pki_dir_ = nullptr;
CertFiles MtlsGrantsTest::ca_, MtlsGrantsTest::server_, MtlsGrantsTest::client_a_,
    MtlsGrantsTest::client_b_, MtlsGrantsTest::client_c_;

TEST_F(MtlsGrantsTest, AUriIdentityGetsItsVolumeAndIsRefusedPutsAndOtherVolumes) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(true));
  auto a = Connect(&client_a_, "");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(VerifiedGet(*a, "v1", 4096, 0).ok());

  auto buf = Allocate(*a, kLen);
  ASSERT_NE(buf, nullptr);
  absl::Status put = Put(*a, *buf, "v1", 0, 7);
  EXPECT_EQ(put.code(), absl::StatusCode::kPermissionDenied) << put;
  EXPECT_EQ(put.message(), "credential 'a' may not put to volume 'v1' (granted: get v1; put none)");
  // Nothing moved: v1 still holds its initial pattern where the put was aimed.
  EXPECT_TRUE(VerifiedGet(*a, "v1", 0, 0).ok());

  absl::StatusOr<gdrstore::OpResult> get2 = a->Write({"v2", 0, kLen}, *buf);
  EXPECT_EQ(get2.status().code(), absl::StatusCode::kPermissionDenied) << get2.status();
  EXPECT_TRUE(absl::StrContains(get2.status().message(),
                                "credential 'a' may not get from "
                                "volume 'v2'"))
      << get2.status();

  auto info = a->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(VolumeNames(*info), (std::vector<std::string>{"v1"}));
  EXPECT_TRUE(info->tls().client_certificate_required());
  ExpectStillServing();
}

TEST_F(MtlsGrantsTest, ADnsIdentityPutsItsVolumeAndIsRefusedGets) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(true));
  auto b = Connect(&client_b_, "");
  ASSERT_NE(b, nullptr);
  auto buf = Allocate(*b, kLen);
  ASSERT_NE(buf, nullptr);
  ASSERT_TRUE(Put(*b, *buf, "v2", 2 * kLen, 41).ok());
  // Token t (get=v2), on a certificate no line names, sees what B put.
  auto t = Connect(&client_c_, kTokenT);
  ASSERT_NE(t, nullptr);
  absl::Status landed = VerifiedGet(*t, "v2", 2 * kLen, 41);
  EXPECT_TRUE(landed.ok()) << landed;

  std::memset(buf->data(), 0x5a, kLen);
  absl::StatusOr<gdrstore::OpResult> get = b->Write({"v2", 2 * kLen, kLen}, *buf);
  EXPECT_EQ(get.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(get.status().message(),
            "credential 'san:b.test' may not get from "
            "volume 'v2' (granted: get none; put v2)");
  for (size_t i = 0; i < kLen; ++i) {
    ASSERT_EQ(buf->data()[i], std::byte{0x5a}) << "buffer byte " << i << " changed";
  }
  EXPECT_EQ(Put(*b, *buf, "v1", 0, 42).code(), absl::StatusCode::kPermissionDenied);
  auto info = b->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(VolumeNames(*info), (std::vector<std::string>{"v2"}));
  ExpectStillServing();
}

TEST_F(MtlsGrantsTest, AnUnlistedCertificateWithoutATokenIsUnauthenticated) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(true));
  auto c = Connect(&client_c_, "");
  ASSERT_NE(c, nullptr);
  auto buf = Allocate(*c, kLen);
  ASSERT_NE(buf, nullptr);
  absl::StatusOr<gdrstore::OpResult> get = c->Write({"v1", 0, kLen}, *buf);
  EXPECT_EQ(get.status().code(), absl::StatusCode::kUnauthenticated) << get.status();
  // The daemon says what it would accept and that the certificate's names are not listed.
  EXPECT_TRUE(absl::StrContains(get.status().message(), "none of them listed")) << get.status();
  EXPECT_EQ(Put(*c, *buf, "v2", 0, 3).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(c->GetInfo().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(c->Ping().code(), absl::StatusCode::kUnauthenticated);
  ExpectStillServing();
}

TEST_F(MtlsGrantsTest, ATokenBesideAListedCertificateIsJudgedAlone) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(true));
  // A wrong token is refused although the certificate would have been accepted.
  auto wrong = Connect(&client_a_, kWrongToken);
  ASSERT_NE(wrong, nullptr);
  auto buf = Allocate(*wrong, kLen);
  ASSERT_NE(buf, nullptr);
  absl::StatusOr<gdrstore::OpResult> refused = wrong->Write({"v1", 0, kLen}, *buf);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_FALSE(absl::StrContains(refused.status().message(), kWrongToken));
  EXPECT_EQ(wrong->GetInfo().status().code(), absl::StatusCode::kPermissionDenied);

  // Token t on certificate A: t's grants, not a's.
  auto t = Connect(&client_a_, kTokenT);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(VerifiedGet(*t, "v2", kLen, 0).ok());
  auto tbuf = Allocate(*t, kLen);  // a Client takes only buffers it registered
  ASSERT_NE(tbuf, nullptr);
  absl::StatusOr<gdrstore::OpResult> get1 = t->Write({"v1", 0, kLen}, *tbuf);
  EXPECT_EQ(get1.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(get1.status().message(),
            "credential 't' may not get from volume "
            "'v1' (granted: get v2; put none)");
  auto info = t->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(VolumeNames(*info), (std::vector<std::string>{"v2"}));
  ExpectStillServing();
}

// The same file on a daemon that serves TLS but verifies no client certificate (it asks for none,
// so a client's certificate never reaches it): san: lines match nothing; tokens still work.
TEST_F(MtlsGrantsTest, WithoutAClientCaSanLinesMatchNothing) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(false));
  auto a = Connect(&client_a_, "");
  ASSERT_NE(a, nullptr);
  auto buf = Allocate(*a, kLen);
  ASSERT_NE(buf, nullptr);
  absl::StatusOr<gdrstore::OpResult> get = a->Write({"v1", 0, kLen}, *buf);
  EXPECT_EQ(get.status().code(), absl::StatusCode::kUnauthenticated) << get.status();
  EXPECT_EQ(a->GetInfo().status().code(), absl::StatusCode::kUnauthenticated);
  auto b = Connect(&client_b_, "");
  ASSERT_NE(b, nullptr);
  auto bbuf = Allocate(*b, kLen);  // a Client takes only buffers it registered
  ASSERT_NE(bbuf, nullptr);
  EXPECT_EQ(Put(*b, *bbuf, "v2", 0, 9).code(), absl::StatusCode::kUnauthenticated);
  // The start warned about each line that cannot match.
  for (const char* label : {"'a'", "'san:b.test'"}) {
    const std::string want = absl::StrCat("credential ", label, " names a client certificate, "
                                          "but this daemon verifies none");
    EXPECT_TRUE(absl::StrContains(daemon_->Stderr(), want)) << want << "\n" << daemon_->Stderr();
  }

  auto t = Connect(&client_a_, kTokenT);
  ASSERT_NE(t, nullptr);
  auto info = t->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->tls().client_certificate_required());
  // What B's refused put aimed at is untouched.
  EXPECT_TRUE(VerifiedGet(*t, "v2", 0, 0).ok());
  ExpectStillServing();
}

TEST_F(MtlsGrantsTest, SighupChangesTheGrantsOfAnIdentitysOpenStream) {
  ASSERT_NO_FATAL_FAILURE(StartDaemon(true));
  auto a = Connect(&client_a_, "");
  ASSERT_NE(a, nullptr);
  auto buf = Allocate(*a, kLen);
  ASSERT_NE(buf, nullptr);
  auto stream = a->OpenStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  constexpr uint64_t kOffset = 5 * kLen;
  constexpr uint64_t kSalt = 77;
  auto submit = [&](OpKind kind) {
    if (kind == OpKind::kRead) {
      PatternFill(PatternSeed("v1", kSalt), kOffset, std::span<std::byte>(buf->data(), kLen));
    } else {
      std::memset(buf->data(), 0, kLen);
    }
    std::promise<absl::Status> p;
    (*stream)->Submit(kind, {"v1", kOffset, kLen}, *buf, 0,
                      [&p](absl::StatusOr<gdrstore::OpResult> r) { p.set_value(r.status()); });
    return p.get_future().get();
  };
  auto holds = [&](uint64_t salt) {
    return !PatternMismatch(PatternSeed("v1", salt), kOffset,
                            std::span<const std::byte>(buf->data(), kLen))
                .has_value();
  };
  ASSERT_TRUE(submit(OpKind::kWrite).ok());
  EXPECT_TRUE(holds(0));
  absl::Status put = submit(OpKind::kRead);
  ASSERT_EQ(put.code(), absl::StatusCode::kPermissionDenied) << put;

  const pid_t pid = daemon_->pid();
  WriteTokenFile(tokens_, TokenFile("put=v1"));
  ASSERT_TRUE(daemon_->Signal(SIGHUP).ok());
  // The reload runs on the daemon's main thread; the open stream sees it on a later message.
  ASSERT_TRUE(PollUntil([&] { return submit(OpKind::kRead).ok(); }, absl::Seconds(20)))
      << daemon_->Stderr();
  absl::Status get = submit(OpKind::kWrite);
  EXPECT_EQ(get.code(), absl::StatusCode::kPermissionDenied) << get;
  EXPECT_EQ(get.message(),
            "credential 'a' may not get from volume 'v1' "
            "(granted: get none; put v1)");
  auto info = a->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(VolumeNames(*info), (std::vector<std::string>{"v1"}));

  // Back to get=v1: the same stream now reads what it put while it could.
  WriteTokenFile(tokens_, TokenFile("get=v1"));
  ASSERT_TRUE(daemon_->Signal(SIGHUP).ok());
  ASSERT_TRUE(PollUntil([&] { return submit(OpKind::kWrite).ok(); }, absl::Seconds(20)))
      << daemon_->Stderr();
  EXPECT_TRUE(holds(kSalt)) << "the put of the reloaded grant did not land";
  EXPECT_EQ(submit(OpKind::kRead).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE((*stream)->Close().ok());
  EXPECT_EQ(daemon_->pid(), pid);
  ExpectStillServing();
}

}  // namespace
}  // namespace gdr::integ
