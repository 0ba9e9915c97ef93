// The dc transport's process-level behaviour that this machine can show for real: gdrstored
// decides whether to offer dc and says why not in GetInfo, `--dc on` fails fast, gdrctl
// selftest runs end to end (over tcp here: the same steps a hardware owner runs with
// --transport dc) and refuses dc naming the daemon's reason, and --transport auto falls back.
// No test here can show DC working: that needs ConnectX hardware.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/verbs/verbs_device.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

std::vector<std::string> Gdrctl(const DaemonProcess& d, std::vector<std::string> args) {
  std::vector<std::string> argv = {GDR_GDRCTL_BIN, "--daemon", d.address()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

TEST(DcDaemonTest, GetInfoSaysWhyDcIsAbsent) {
  auto d = DaemonProcess::Start({"--volume", "vol0=8MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  gdrstore::ClientOptions o;
  o.daemon_address = (*d)->address();
  auto c = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto info = (*c)->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  bool seen = false;
  for (const auto& t : info->transports()) {
    if (t.transport() != gdrstore::v1::TRANSPORT_DC) continue;
    seen = true;
    // This machine (and the SoftRoCE guest) has no mlx5 device: dc is never offered here.
    EXPECT_FALSE(t.available());
    EXPECT_FALSE(t.detail().empty());
    const bool no_device = absl::StrContains(t.detail(), "RDMA device");
    const bool not_mlx5 = absl::StrContains(t.detail(), "mlx5dv_is_supported");
    const bool no_build = absl::StrContains(t.detail(), "mlx5dv support");
    EXPECT_TRUE(no_device || not_mlx5 || no_build) << t.detail();
  }
  EXPECT_TRUE(seen);
}

TEST(DcDaemonTest, DcOnWithoutACapableDeviceExitsNamingWhatIsMissing) {
  auto dir = TempDir::Create("dc_test");
  ASSERT_TRUE(dir.ok());
  auto r = RunProcess({GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--volume", "v=1MiB",
                       "--dc", "on"},
                      (*dir)->path(), "dc_on", absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  // One line, from the process itself, naming dc and the missing piece.
  std::string last;
  for (absl::string_view line : absl::StrSplit(r->err, '\n', absl::SkipEmpty())) last = std::string(line);
  EXPECT_TRUE(absl::StartsWith(last, "gdrstored: ")) << r->err;
  EXPECT_TRUE(absl::StrContains(last, "dc") || absl::StrContains(last, "mlx5")) << last;
}

// dc runs on the verbs core without rc: --rc off --dc on is accepted, and on a host with no
// DC-capable device the process still exits at once naming dc.
TEST(DcDaemonTest, DcOnWithRcOffNeedsOnlyTheDevice) {
  auto dir = TempDir::Create("dc_test");
  ASSERT_TRUE(dir.ok());
  auto r = RunProcess({GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--volume", "v=1MiB",
                       "--dc", "on", "--rc", "off"},
                      (*dir)->path(), "dc_rc", absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  EXPECT_FALSE(absl::StrContains(r->err, "--rc off")) << "not refused as a usage error: " << r->err;
  EXPECT_TRUE(absl::StrContains(r->err, "gdrstored: transport dc") ||
              absl::StrContains(r->err, "mlx5"))
      << r->err;
}

TEST(DcSelftestTest, SelftestPassesEveryStepOverTcp) {
  auto d = DaemonProcess::Start({"--volume", "vol0=32MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto r = RunProcess(Gdrctl(**d, {"selftest"}), (*d)->dir(), "selftest_tcp", absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  int pass = 0;
  for (absl::string_view line : absl::StrSplit(r->out, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "PASS ")) ++pass;
    EXPECT_FALSE(absl::StartsWith(line, "FAIL ")) << line;
  }
  // daemon, local, register, 5 x (write, read), bad rkey, recovery.
  EXPECT_EQ(pass, 15) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "PASS bad rkey: refused as expected")) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "selftest PASSED (transport tcp)")) << r->out;
}

TEST(DcSelftestTest, SelftestOfDcFailsAtTheDaemonStepWithItsReason) {
  auto d = DaemonProcess::Start({"--volume", "vol0=8MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto r = RunProcess(Gdrctl(**d, {"--transport", "dc", "selftest"}), (*d)->dir(), "selftest_dc",
                      absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1) << r->out << r->err;
  EXPECT_TRUE(absl::StartsWith(r->out, "FAIL daemon: ")) << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "does not offer dc: ")) << r->out;
}

TEST(DcSelftestTest, SelftestNamesAMissingVolume) {
  auto d = DaemonProcess::Start({"--volume", "vol0=8MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto r = RunProcess(Gdrctl(**d, {"selftest", "--volume", "nosuch"}), (*d)->dir(), "selftest_vol",
                      absl::Seconds(60));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r->out, "FAIL volume: the daemon has no volume 'nosuch'")) << r->out;
}

TEST(DcSelftestTest, AutoFallsBackAndSaysWhyDcWasNotUsed) {
  auto d = DaemonProcess::Start({"--volume", "vol0=8MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto r = RunProcess(Gdrctl(**d, {"--transport", "auto", "selftest", "--sizes", "1,4KiB"}),
                      (*d)->dir(), "selftest_auto", absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0) << r->out << r->err;
  // No mlx5 device on this machine or in the SoftRoCE guest: never dc.
  EXPECT_TRUE(absl::StrContains(r->out, "PASS local auto: rc") ||
              absl::StrContains(r->out, "PASS local auto: tcp"))
      << r->out;
  EXPECT_TRUE(absl::StrContains(r->out, "dc: daemon: ")) << r->out;
}

}  // namespace
}  // namespace gdr::integ
