// gdragent owning the verbs device (SoftRoCE rxe0 in the test guest, label rxe): a client
// process that cannot see /dev/infiniband (a mount namespace with an empty tmpfs over it) moves
// verified bytes over rc through the agent, and its results name that path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/verbs/verbs_device.h"
#include "tests/agent/agent_harness.h"
#include "tests/integration/child_process.h"
#include "tests/integration/daemon_process.h"

namespace gdr::agent::test {
namespace {

TEST(AgentRxeTest, AClientWithoutRdmaDevicesMovesVerifiedBytesOverRcThroughTheAgent) {
  const std::vector<std::string> devices = verbs::ListDeviceNames();
  if (devices.empty()) GTEST_SKIP() << "no verbs device (runs in the SoftRoCE guest)";
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for the client's mount namespace";
  const std::string dev = devices.front();
  auto d = integ::DaemonProcess::Start({"--rdma-device", dev, "--volume", "vol0=64MiB"},
                                       absl::Seconds(120));
  ASSERT_TRUE(d.ok()) << d.status();
  auto a = AgentProcess::Start((*d)->address(), {"--transport", "rc", "--rdma-device", dev},
                               nullptr, absl::Seconds(120));
  ASSERT_TRUE(a.ok()) << a.status();
  auto dir = integ::TempDir::Create("agent-rxe");
  ASSERT_TRUE(dir.ok()) << dir.status();
  int run = 0;
  using Op = std::tuple<std::string, std::string, std::string>;  // command, size, offset
  for (const auto& [cmd, size, off] : std::vector<Op>{
           {"write", "8MiB", "4097"}, {"read", "8MiB", "12345"}, {"write", "1234567", "77"}}) {
    // The client sees no verbs device at all; --require makes it fail rather than take another
    // path to the daemon.
    const std::string client = absl::StrCat(
        "mount -t tmpfs none /dev/infiniband && ! ls /dev/infiniband/uverbs0 2>/dev/null && exec ",
        GDR_GDRCTL_BIN, " --agent ", (*a)->socket_path(), " --require agent,rc ", cmd,
        " --volume vol0 -s ", size, " -o ", off, " --verify");
    auto r = integ::RunProcess({"/usr/bin/unshare", "--mount", "--", "/bin/sh", "-c", client},
                               (*dir)->path(), absl::StrCat("client", run++), absl::Seconds(120));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->exit_code, 0) << r->Describe();
    EXPECT_TRUE(absl::StrContains(r->out, "verified")) << r->out;
    EXPECT_TRUE(absl::StrContains(r->out, absl::StrCat("path agent/host>rc:", dev, "/host")))
        << r->out;
  }
}

}  // namespace
}  // namespace gdr::agent::test
