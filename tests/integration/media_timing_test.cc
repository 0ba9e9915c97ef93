// Simulated media timing on a real gdrstored: at low load (one op at a time) the daemon-side
// service time of an op matches the volume's latency_us and bandwidth settings within ±20%;
// many ops waiting on the simulated media do not cost a thread each; SIGHUP changes the timing
// live.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Median daemon-side service time of `n` sequential Writes of `size` bytes from `volume`.
absl::StatusOr<double> MedianServiceUs(gdrstore::Client& c, const gdrstore::Buffer& buf,
                                       const std::string& volume, uint64_t size, int n) {
  std::vector<double> us;
  for (int i = 0; i < n; ++i) {
    auto r = c.Write({volume, (i * size) % (8 * kMiB), size}, buf);
    if (!r.ok()) return r.status();
    us.push_back(r->service_ns / 1e3);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

int Threads(pid_t pid) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"))) {
    (void)e;
    ++n;
  }
  return n;
}

TEST(MediaTimingTest, LatencyAndBandwidthWithinTwentyPercentAtLowLoad) {
  auto dir = TempDir::Create("gdr-media");
  ASSERT_TRUE(dir.ok());
  const std::string config = (*dir)->File("gdrstored.conf");
  auto write_config = [&](int lat_us) {
    std::ofstream(config, std::ios::trunc)
        << "volume = [\"fast=16MiB\", \"lat=16MiB,latency_us=" << lat_us
        << "\", \"bw=16MiB,bandwidth=100MiB/s\"]\n";
  };
  write_config(5000);
  auto d = DaemonProcess::Start({"--config", config});
  ASSERT_TRUE(d.ok()) << d.status();
  gdrstore::ClientOptions o;
  o.daemon_address = (*d)->address();
  auto c = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c.ok());
  auto buf = (*c)->AllocateBuffer(4 * kMiB);
  ASSERT_TRUE(buf.ok());

  // Baseline: the same ops on a volume without timing are far below the settings.
  auto fast = MedianServiceUs(**c, **buf, "fast", 4096, 20);
  ASSERT_TRUE(fast.ok()) << fast.status();
  std::printf("no timing: median service %.0f us for 4 KiB\n", *fast);

  auto lat = MedianServiceUs(**c, **buf, "lat", 4096, 30);
  ASSERT_TRUE(lat.ok()) << lat.status();
  std::printf("latency_us=5000: median service %.0f us\n", *lat);
  EXPECT_GE(*lat, 5000 * 0.8);
  EXPECT_LE(*lat, 5000 * 1.2);

  // 4 MiB at 100 MiB/s = 40 ms.
  auto bw = MedianServiceUs(**c, **buf, "bw", 4 * kMiB, 8);
  ASSERT_TRUE(bw.ok()) << bw.status();
  const double want_bw_us = 4.0 / 100.0 * 1e6;
  std::printf("bandwidth=100MiB/s: median service %.0f us for 4 MiB (setting: %.0f us)\n", *bw,
              want_bw_us);
  EXPECT_GE(*bw, want_bw_us * 0.8);
  EXPECT_LE(*bw, want_bw_us * 1.2);

  // 256 ops parked on the simulated media at once: no thread per op.
  const int threads_before = Threads((*d)->pid());
  std::vector<std::future<absl::StatusOr<gdrstore::OpResult>>> many;
  for (int i = 0; i < 256; ++i) {
    many.push_back((*c)->SubmitAsync(gdrstore::OpKind::kWrite, {"lat", i * 4096u, 4096}, **buf,
                                     (i % 512) * 4096u));
  }
  int threads_peak = threads_before;
  for (auto& f : many) {
    while (f.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
      threads_peak = std::max(threads_peak, Threads((*d)->pid()));
    }
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GE(r->service_ns, 5000 * 800u);  // every one waited for the simulated media
  }
  std::printf("threads: %d before, %d peak with 256 ops on the media\n", threads_before,
              threads_peak);
  EXPECT_LT(threads_peak, threads_before + 32);

  // SIGHUP: the new latency applies to the next ops.
  write_config(3000);
  ASSERT_TRUE((*d)->Signal(SIGHUP).ok());
  ASSERT_TRUE(PollUntil(
      [&] { return absl::StrContains((*d)->Stderr(), "volume lat media: latency_us=5000"); },
      absl::Seconds(10)))
      << (*d)->Stderr();
  auto lat2 = MedianServiceUs(**c, **buf, "lat", 4096, 30);
  ASSERT_TRUE(lat2.ok()) << lat2.status();
  std::printf("after reload, latency_us=3000: median service %.0f us\n", *lat2);
  EXPECT_GE(*lat2, 3000 * 0.8);
  EXPECT_LE(*lat2, 3000 * 1.2);

  auto st = (*d)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0");
}

}  // namespace
}  // namespace gdr::integ
