// Case 5: a client process killed in the middle of large transfers. The daemon keeps serving
// other clients, and the killed client's resources (gRPC connection, tcp links, their threads
// and memory) are released: the daemon's fd count returns to the baseline taken before, and its
// VmRSS to within a tolerance of it.
#include <gtest/gtest.h>
#include <signal.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/verified_ops.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kBenchVolume = 256 * kMiB;
constexpr uint64_t kOtherVolume = 16 * kMiB;
constexpr uint64_t kRssTolerance = 32 * kMiB;

TEST(ClientKillTest, DaemonReleasesAKilledClientsResources) {
  auto d =
      DaemonProcess::Start({"--volume", absl::StrCat("vol0=", kBenchVolume), "--volume",
                            absl::StrCat("other=", kOtherVolume), "--tcp-idle-timeout-s", "3600"});
  ASSERT_TRUE(d.ok()) << d.status();
  DaemonProcess& daemon = **d;

  // The other client: connected and with its links open before the baseline is taken.
  gdrstore::ClientOptions o;
  o.daemon_address = daemon.address();
  auto other = gdrstore::Client::Connect(o);
  ASSERT_TRUE(other.ok()) << other.status();
  auto buf = (*other)->AllocateBuffer(2 * kMiB);
  ASSERT_TRUE(buf.ok()) << buf.status();
  SaltMap salts(kOtherVolume);
  std::mt19937_64 rng(5);
  int op_index = 0;
  auto other_op = [&]() -> absl::Status {
    const uint64_t len = 1 + rng() % (2 * kMiB - 2 * kGuardBytes - 4096);
    const gdrstore::Extent e{"other", rng() % (kOtherVolume - len), len};
    const size_t boff = kGuardBytes + rng() % 4096;
    return op_index++ % 2 ? VerifiedWrite(**other, **buf, boff, e, salts)
                          : VerifiedRead(**other, **buf, boff, boff, e, 1 + rng() % 1000, &salts);
  };
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(other_op().ok());

  auto base_fds = CountOpenFds(daemon.pid());
  auto base_rss = ResidentBytes(daemon.pid());
  ASSERT_TRUE(base_fds.ok()) << base_fds.status();
  ASSERT_TRUE(base_rss.ok()) << base_rss.status();

  auto dir = TempDir::Create("gdrctl-kill");
  ASSERT_TRUE(dir.ok()) << dir.status();
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    auto bench =
        ChildProcess::Spawn({GDR_GDRCTL_BIN, "--daemon", daemon.address(), "bench", "-t", "write",
                             "-s", "64MiB", "-n", "100000", "--qd", "4", "--volume", "vol0", "-q"},
                            (*dir)->File(absl::StrCat("bench", round, ".out")),
                            (*dir)->File(absl::StrCat("bench", round, ".err")));
    ASSERT_TRUE(bench.ok()) << bench.status();
    // Progress: the bench buffer (4 x 64 MiB, untouched until data lands) fills up as the
    // daemon writes into it. Past 160 MiB resident, at least two ops' worth has arrived.
    const bool progressed = PollUntil(
        [&] {
          auto rss = ResidentBytes((*bench)->pid());
          return !(*bench)->Running() || (rss.ok() && *rss > 160 * kMiB);
        },
        absl::Seconds(60));
    ASSERT_TRUE(progressed) << "bench made no progress; stderr: "
                            << ReadFileOrEmpty((*bench)->stderr_path());
    ASSERT_TRUE((*bench)->Running()) << "bench " << DescribeWaitStatus((*bench)->wait_status())
                                     << ": " << ReadFileOrEmpty((*bench)->stderr_path());
    auto busy_fds = CountOpenFds(daemon.pid());
    ASSERT_TRUE(busy_fds.ok());
    EXPECT_GT(*busy_fds, *base_fds) << "the bench's connection and links should be open";
    std::printf("round %d: daemon fds baseline %d, with the bench %d\n", round, *base_fds,
                *busy_fds);

    ASSERT_TRUE((*bench)->Signal(SIGKILL).ok());
    auto st = (*bench)->Wait(absl::Seconds(10));
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(DescribeWaitStatus(*st), "killed by signal 9 (Killed)");

    // Serving continues at once, while the daemon is still cleaning up after the dead client.
    for (int i = 0; i < 4; ++i) {
      absl::Status s = other_op();
      ASSERT_TRUE(s.ok()) << s << "\ndaemon stderr:\n" << daemon.Stderr();
    }
    int last_fds = -1;
    const bool fds_back = PollUntil(
        [&] {
          auto n = CountOpenFds(daemon.pid());
          last_fds = n.ok() ? *n : -1;
          return last_fds == *base_fds;
        },
        absl::Seconds(30), absl::Milliseconds(50));
    EXPECT_TRUE(fds_back) << "daemon fds: " << last_fds << ", baseline " << *base_fds
                          << "\nopen: " << DescribeOpenFds(daemon.pid());
    uint64_t last_rss = 0;
    const bool rss_back = PollUntil(
        [&] {
          auto r = ResidentBytes(daemon.pid());
          last_rss = r.ok() ? *r : 0;
          return r.ok() && *r <= *base_rss + kRssTolerance;
        },
        absl::Seconds(30), absl::Milliseconds(50));
    EXPECT_TRUE(rss_back) << "daemon VmRSS " << last_rss << " vs baseline " << *base_rss;
    for (int i = 0; i < 4; ++i) {
      absl::Status s = other_op();
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  auto health = HealthCheck(daemon.address(), absl::Seconds(5));
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_TRUE(*health);

  buf->reset();
  other->reset();
  auto st = daemon.Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << daemon.Stderr();
}

}  // namespace
}  // namespace gdr::integ
