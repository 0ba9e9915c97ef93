// gdrstored's rails (--rdma-device, repeatable and comma-separated) as a process shows them: a
// named device that does not exist stops the daemon at start naming the rail and the devices
// present, a bad rail list is a usage error, and GetInfo / GetStats / gdrctl list the rails the
// daemon serves: none on a host without RDMA devices, the one automatic rail where there are
// some (the SoftRoCE guest). Traffic over several rails runs in the guest (tests/rxe).
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/verbs/verbs_device.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"

namespace gdr::integ {
namespace {

// The last line of `text`: the daemon's one-line reason for exiting.
std::string LastLine(const std::string& text) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    last = std::string(line);
  }
  return last;
}

absl::StatusOr<ProcessResult> RunDaemon(const TempDir& dir, const std::string& tag,
                                        std::vector<std::string> args) {
  std::vector<std::string> argv = {GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--volume",
                                   "v=1MiB"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, dir.path(), tag, absl::Seconds(60));
}

TEST(DaemonRailsTest, NamedRailsThatDoNotExistStopTheDaemonNamingThemAndWhatExists) {
  auto dir = TempDir::Create("daemon_rails_test");
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto r = RunDaemon(**dir, "nosuch", {"--rdma-device", "nosuch0,nosuch1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  const std::string last = LastLine(r->err);
  EXPECT_TRUE(absl::StartsWith(last, "gdrstored: rail 0 (nosuch0")) << r->err;
  EXPECT_TRUE(absl::StrContains(last, "nosuch0,nosuch1")) << last;
  const std::vector<std::string> present = verbs::ListDeviceNames();
  if (present.empty()) {
    EXPECT_TRUE(absl::StrContains(last, "no RDMA devices")) << last;
  }
  for (const std::string& name : present) {
    EXPECT_TRUE(absl::StrContains(last, name)) << "the message lists " << name << ": " << last;
  }
}

TEST(DaemonRailsTest, ADeviceNamedTwiceIsAUsageError) {
  auto dir = TempDir::Create("daemon_rails_test");
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto r = RunDaemon(**dir, "twice", {"--rdma-device", "rxe0", "--rdma-device", "rxe1,rxe0"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  EXPECT_TRUE(absl::StrContains(LastLine(r->err), "--rdma-device: device 'rxe0' is named twice"))
      << r->err;
}

TEST(DaemonRailsTest, AnAddressWithSeveralRailsIsAUsageError) {
  auto dir = TempDir::Create("daemon_rails_test");
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto r = RunDaemon(**dir, "addr", {"--rdma-device", "rxe0,rxe1", "--rdma-addr", "10.11.0.1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  EXPECT_TRUE(absl::StrContains(LastLine(r->err), "--rdma-addr picks one device")) << r->err;
}

// No device named: the automatic rail where the host has an RDMA device, no rail where it has
// none; GetInfo, GetStats and gdrctl agree.
TEST(DaemonRailsTest, InfoAndStatsListTheRailsServed) {
  auto d = DaemonProcess::Start({"--volume", "vol0=4MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  gdrstore::ClientOptions o;
  o.daemon_address = (*d)->address();
  auto c = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto info = (*c)->GetInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  auto stats = GetStats(**c);
  ASSERT_TRUE(stats.ok()) << stats.status();
  const bool have_devices = !verbs::ListDeviceNames().empty();
  auto text = RunProcess({GDR_GDRCTL_BIN, "--daemon", (*d)->address(), "info"}, (*d)->dir(),
                         "info", absl::Seconds(60));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->exit_code, 0) << text->Describe();
  auto json = RunProcess({GDR_GDRCTL_BIN, "--daemon", (*d)->address(), "--json", "info"},
                         (*d)->dir(), "info_json", absl::Seconds(60));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->exit_code, 0) << json->Describe();
  if (!have_devices) {
    EXPECT_FALSE(info->has_rdma());
    EXPECT_EQ(info->rails_size(), 0);
    EXPECT_EQ(stats->rails_size(), 0);
    EXPECT_FALSE(absl::StrContains(text->out, "rails (daemon)")) << text->out;
    EXPECT_FALSE(absl::StrContains(json->out, "\"rails\"")) << json->out;
    return;
  }
  ASSERT_TRUE(info->has_rdma());
  ASSERT_EQ(info->rails_size(), 1) << "no device named: one automatic rail";
  const auto& rail = info->rails(0);
  EXPECT_EQ(rail.index(), 0u);
  EXPECT_EQ(rail.device(), info->rdma().device()) << "GetInfo.rdma is the first rail";
  EXPECT_EQ(rail.port(), info->rdma().port());
  EXPECT_EQ(rail.port_state(), "ACTIVE");
  EXPECT_TRUE(rail.serving());
  EXPECT_EQ(rail.gid(), info->rdma().gid());
  ASSERT_EQ(stats->rails_size(), 1);
  EXPECT_EQ(stats->rails(0).device(), rail.device());
  EXPECT_TRUE(stats->rails(0).serving());
  EXPECT_EQ(stats->rails(0).down_events(), 0u);
  EXPECT_EQ(stats->rails(0).refused(), 0u);
  EXPECT_TRUE(absl::StrContains(text->out, "rails (daemon):")) << text->out;
  EXPECT_TRUE(absl::StrContains(text->out, rail.device())) << text->out;
  EXPECT_TRUE(absl::StrContains(json->out, absl::StrCat("\"rails\":[{\"index\":0,\"device\":\"",
                                                        rail.device(), "\"")))
      << json->out;
}

}  // namespace
}  // namespace gdr::integ
