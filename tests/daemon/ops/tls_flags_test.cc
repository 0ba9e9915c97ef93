// The listen rule and the TLS flag checks: which addresses count as loopback, when a non-loopback
// address is refused and what the refusal names, and a SIGHUP's view of TLS.
#include "daemon/ops/tls_flags.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "daemon/ops/daemon_config.h"
#include "daemon/ops/reload.h"

namespace gdr {
namespace {

TEST(TlsFlagsTest, LoopbackListenAddresses) {
  for (const char* a : {"127.0.0.1:50051", "127.0.0.1:0", "127.8.9.10:1", "localhost:50051",
                        "[::1]:50051", "unix:/run/gdrstored.sock", "unix-abstract:gdr"}) {
    EXPECT_TRUE(IsLoopbackListen(a)) << a;
  }
  for (const char* a : {"0.0.0.0:50051", "[::]:0", "10.0.0.7:50051", "[fe80::1]:1",
                        "127.evil.example:50051", "storage-7:50051", ":50051", "[::1"}) {
    EXPECT_FALSE(IsLoopbackListen(a)) << a;
  }
}

TEST(TlsFlagsTest, NonLoopbackNeedsTlsTokensOrInsecure) {
  TlsSettings none;
  absl::Status s = CheckListenExposure("0.0.0.0:50051", none, /*tokens_configured=*/false);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  for (const char* way : {"--tls-cert", "--token-file", "--insecure", "0.0.0.0:50051"}) {
    EXPECT_TRUE(absl::StrContains(s.message(), way)) << way << " not in " << s.message();
  }
  EXPECT_TRUE(CheckListenExposure("0.0.0.0:50051", none, /*tokens_configured=*/true).ok());
  TlsSettings tls{"c.pem", "k.pem", "", false};
  EXPECT_TRUE(CheckListenExposure("0.0.0.0:50051", tls, false).ok());
  TlsSettings insecure;
  insecure.insecure = true;
  EXPECT_TRUE(CheckListenExposure("[::]:50051", insecure, false).ok());
  EXPECT_TRUE(CheckListenExposure("127.0.0.1:50051", none, false).ok());
}

TEST(TlsFlagsTest, CertAndKeyGoTogetherAndMtlsNeedsThem) {
  EXPECT_TRUE(CheckTlsFlags({}).ok());
  EXPECT_TRUE(CheckTlsFlags({"c", "k", "", false}).ok());
  EXPECT_TRUE(CheckTlsFlags({"c", "k", "ca", false}).ok());
  EXPECT_EQ(CheckTlsFlags({"c", "", "", false}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckTlsFlags({"", "k", "", false}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckTlsFlags({"", "", "ca", false}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TlsFlagsTest, ParsedFromFlags) {
  const char* argv[] = {"gdrstored", "--listen", "0.0.0.0:0",       "--tls-cert", "c.pem",
                        "--tls-key", "k.pem",    "--tls-client-ca", "ca.pem"};
  absl::StatusOr<DaemonConfig> cfg = ParseDaemonConfig(9, const_cast<char**>(argv));
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->tls.cert, "c.pem");
  EXPECT_EQ(cfg->tls.key, "k.pem");
  EXPECT_TRUE(cfg->tls.mutual());

  const char* open[] = {"gdrstored", "--listen", "0.0.0.0:0"};
  EXPECT_EQ(ParseDaemonConfig(3, const_cast<char**>(open)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const char* insecure[] = {"gdrstored", "--listen", "0.0.0.0:0", "--insecure"};
  EXPECT_TRUE(ParseDaemonConfig(4, const_cast<char**>(insecure)).ok());
}

TEST(TlsFlagsTest, ReloadMovesPathsLiveButNotTlsOnOrOff) {
  DaemonConfig a;
  a.tls = {"a.pem", "a.key", "", false};
  DaemonConfig b = a;
  b.tls = {"b.pem", "b.key", "", false};
  ReloadPlan moved = PlanReload(a, b);
  EXPECT_EQ(moved.effective.tls.cert, "b.pem");
  EXPECT_TRUE(moved.needs_restart.empty());
  EXPECT_FALSE(moved.applied.empty());

  DaemonConfig m = a;
  m.tls.client_ca = "ca.pem";
  ReloadPlan to_mtls = PlanReload(a, m);
  EXPECT_EQ(to_mtls.effective.tls.client_ca, "");
  ASSERT_EQ(to_mtls.needs_restart.size(), 1u);
  EXPECT_EQ(to_mtls.needs_restart[0], "tls: TLS -> mTLS");
}

}  // namespace
}  // namespace gdr
