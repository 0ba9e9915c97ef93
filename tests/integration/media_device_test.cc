// The device model of a volume (daemon/sim/media_timing.h) on a real
// gdrstored, driven by 16 concurrent clients (one Client, connection and thread
// each). Each figure is checked as a ratio computed from op counts, bytes and
// timestamps:
// - upper bounds follow from the model and hold on any machine: n ops moving B
// bytes through a
//   channel of rate R cannot finish in less than B/R (IOPS: (n-1)/rate), so the
//   delivered rate is at most the model's (1% for clock granularity); a queue
//   never holds more than its depth; an op never completes before its own
//   latency sample, so the k-th fastest op is no faster than the k-th smallest
//   of the seeded samples the daemon drew (computed here from the seed);
// - lower bounds need the 16 clients to keep the device busy, which a loaded
// 2-core machine
//   does at these small figures (tens of MB/s, a thousand or two IOPS); they
//   allow 35% slack.
// The configuration is a file (the config-file form of the options), reloaded
// on SIGHUP.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "daemon/sim/latency_sampler.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr int kClients = 16;
constexpr double kUpperSlack = 1.01;
constexpr double kLowerSlack = 0.65;

struct Load {
  std::string volume;
  gdrstore::OpKind kind = gdrstore::OpKind::kWrite;
  uint64_t size = 4 * kKiB;
  int clients = kClients;
  absl::Duration run = absl::Seconds(3);  // stop starting ops after this long
  int max_ops = 0;                        // and after this many in all (0 = no cap)
};

struct Outcome {
  uint64_t ops = 0;
  uint64_t bytes = 0;
  double seconds = 0;              // first op sent .. last answer received
  std::vector<double> service_us;  // daemon-side, sorted
  std::string error;
  double rate() const { return bytes / seconds; }
  double iops() const { return ops / seconds; }
  double Percentile(double p) const {
    return service_us[std::min(service_us.size() - 1,
                               static_cast<size_t>(p * static_cast<double>(service_us.size())))];
  }
};

// Runs each load on its own clients, all at once, and returns one outcome per
// load.
std::vector<Outcome> Drive(const std::string& address, const std::vector<Load>& loads) {
  struct Worker {
    const Load* load;
    size_t index;
    std::unique_ptr<gdrstore::Client> client;
    std::unique_ptr<gdrstore::Buffer> buffer;
  };
  std::vector<Outcome> out(loads.size());
  std::vector<Worker> workers;
  for (size_t l = 0; l < loads.size(); ++l) {
    for (int i = 0; i < loads[l].clients; ++i) {
      gdrstore::ClientOptions o;
      o.daemon_address = address;
      auto c = gdrstore::Client::Connect(o);
      if (!c.ok()) {
        out[l].error = c.status().ToString();
        return out;
      }
      // Each client has a connection of its own; it is up before the clock starts, so a first
      // connection attempt that fails on a loaded machine (gRPC fails calls fast meanwhile) is
      // retried here and never counted as an op of the load.
      absl::Status up = (*c)->Ping();
      for (int attempt = 0; !up.ok() && attempt < 50; ++attempt) {
        absl::SleepFor(absl::Milliseconds(200));
        up = (*c)->Ping();
      }
      if (!up.ok()) {
        out[l].error = up.ToString();
        return out;
      }
      auto b = (*c)->AllocateBuffer(loads[l].size);
      if (!b.ok()) {
        out[l].error = b.status().ToString();
        return out;
      }
      workers.push_back({&loads[l], l, *std::move(c), *std::move(b)});
    }
  }
  absl::Mutex mu;
  std::vector<std::atomic<int>> started(loads.size());
  std::vector<std::thread> threads;
  const absl::Time t0 = absl::Now();
  for (size_t w = 0; w < workers.size(); ++w) {
    threads.emplace_back([&, w] {
      Worker& me = workers[w];
      const Load& load = *me.load;
      std::vector<double> us;
      uint64_t bytes = 0;
      std::string error;
      for (uint64_t n = 0; absl::Now() - t0 < load.run; ++n) {
        if (load.max_ops != 0 && started[me.index].fetch_add(1) >= load.max_ops) break;
        const gdrstore::Extent e{load.volume, ((w * 131 + n) * load.size) % (32 * kMiB), load.size};
        auto r = load.kind == gdrstore::OpKind::kWrite ? me.client->Write(e, *me.buffer)
                                                       : me.client->Read(e, *me.buffer);
        if (!r.ok()) {
          error = r.status().ToString();
          break;
        }
        us.push_back(r->service_ns / 1e3);
        bytes += r->bytes;
      }
      const absl::Time end = absl::Now();
      absl::MutexLock lock(&mu);
      Outcome& o = out[me.index];
      o.ops += us.size();
      o.bytes += bytes;
      o.service_us.insert(o.service_us.end(), us.begin(), us.end());
      o.seconds = std::max(o.seconds, absl::ToDoubleSeconds(end - t0));
      if (!error.empty()) o.error = error;
    });
  }
  for (auto& t : threads) t.join();
  for (Outcome& o : out) std::sort(o.service_us.begin(), o.service_us.end());
  return out;
}

std::optional<gdrstore::v1::MediaTiming> MediaOf(const gdrstore::v1::GetStatsResponse& s,
                                                 const std::string& volume) {
  for (const auto& v : s.volumes()) {
    if (v.name() == volume) return v.media();
  }
  return std::nullopt;
}

class MediaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("gdr-media-device");
    ASSERT_TRUE(dir.ok());
    dir_ = *std::move(dir);
    config_ = dir_->File("gdrstored.conf");
    WriteConfig(4);
    auto d = DaemonProcess::Start({"--config", config_});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    gdrstore::ClientOptions o;
    o.daemon_address = daemon_->address();
    auto c = gdrstore::Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
  }
  void TearDown() override {
    if (daemon_ == nullptr) return;
    auto st = daemon_->Terminate(absl::Seconds(30));
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(DescribeWaitStatus(*st), "exited 0");
  }
  void WriteConfig(int queue_depth) {
    std::ofstream(config_, std::ios::trunc)
        << "volume = "
           "[\"rw=64MiB,read_bandwidth=24MiB/s,write_bandwidth=12MiB/s\",\n"
        << "          \"ops=64MiB,iops=1500,latency_us=1000\",\n"
        << "          \"qd=64MiB,latency_us=4000,queue_depth=" << queue_depth << "\",\n"
        << "          \"tail=64MiB,latency_us=2000,p99_us=10000,seed=5\",\n"
        << "          \"ssd=16MiB,media=sata-ssd,queue_depth=8\"]\n";
  }
  gdrstore::v1::GetStatsResponse Stats() {
    auto s = GetStats(*client_);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : gdrstore::v1::GetStatsResponse();
  }

  std::unique_ptr<TempDir> dir_;
  std::string config_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<gdrstore::Client> client_;
};

// Gets (device reads) and puts (device writes) at once: each direction gets its
// own bandwidth.
TEST_F(MediaDeviceTest, ReadAndWriteBandwidthAreDeliveredSeparately) {
  const double read_bw = 24.0 * kMiB, write_bw = 12.0 * kMiB;
  std::vector<Outcome> r =
      Drive(daemon_->address(), {{"rw", gdrstore::OpKind::kWrite, 256 * kKiB, 8},
                                 {"rw", gdrstore::OpKind::kRead, 256 * kKiB, 8}});
  ASSERT_EQ(r[0].error, "");
  ASSERT_EQ(r[1].error, "");
  const double gets = r[0].rate(), puts = r[1].rate();
  std::printf(
      "gets %.1f MiB/s (model %.0f), puts %.1f MiB/s (model %.0f), %lu "
      "+ %lu ops\n",
      gets / kMiB, read_bw / kMiB, puts / kMiB, write_bw / kMiB, r[0].ops, r[1].ops);
  EXPECT_LE(gets / read_bw, kUpperSlack);
  EXPECT_LE(puts / write_bw, kUpperSlack);
  EXPECT_GE(gets / read_bw, kLowerSlack);
  EXPECT_GE(puts / write_bw, kLowerSlack);
  // The asymmetry shows: twice the rate one way (both directions saturated).
  EXPECT_GT(gets / puts, 1.5);
  EXPECT_LT(gets / puts, 2.6);
}

TEST_F(MediaDeviceTest, IopsLimitHoldsUnderSixteenClients) {
  std::vector<Outcome> r = Drive(daemon_->address(), {{"ops", gdrstore::OpKind::kWrite}});
  ASSERT_EQ(r[0].error, "");
  std::printf("%lu ops in %.2f s: %.0f IOPS (model 1500); service p50 %.0f us\n", r[0].ops,
              r[0].seconds, r[0].iops(), r[0].Percentile(0.5));
  // Starts are 1/1500 s apart: n ops need (n-1)/1500 s at least.
  EXPECT_LE((r[0].ops - 1) / (1500.0 * r[0].seconds), kUpperSlack);
  EXPECT_GE(r[0].iops() / 1500, kLowerSlack);
  EXPECT_GE(r[0].service_us.front(), 1000) << "every op takes its latency";
  auto m = MediaOf(Stats(), "ops");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->ops(), r[0].ops);
  EXPECT_GT(m->queued_ops(), 0u) << "16 clients against 1500 IOPS must wait their turn";
}

// queue_depth=4 and 4 ms per op: at most 1000 ops/s, and 16 clients wait for a
// slot.
TEST_F(MediaDeviceTest, QueueDepthLimitsOpsInTheDeviceAndTheWaitShowsInLatency) {
  std::atomic<bool> stop{false};
  uint32_t max_in_device = 0;
  std::thread watcher([&] {
    while (!stop.load()) {
      if (auto m = MediaOf(Stats(), "qd")) {
        max_in_device = std::max(max_in_device, m->in_device());
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  std::vector<Outcome> r = Drive(daemon_->address(), {{"qd", gdrstore::OpKind::kWrite}});
  stop = true;
  watcher.join();
  ASSERT_EQ(r[0].error, "");
  const double capacity = 4 / 4e-3;
  std::printf(
      "%lu ops in %.2f s: %.0f ops/s (model %.0f); service p50 %.0f us "
      "p99 %.0f us; "
      "at most %u in the device\n",
      r[0].ops, r[0].seconds, r[0].iops(), capacity, r[0].Percentile(0.5), r[0].Percentile(0.99),
      max_in_device);
  // Each slot completes an op at most every 4 ms: n ops need (n - 4) * 4 ms / 4
  // at least.
  EXPECT_LE((r[0].ops - 4) / (capacity * r[0].seconds), kUpperSlack);
  EXPECT_GE(r[0].iops() / capacity, kLowerSlack);
  EXPECT_LE(max_in_device, 4u);
  EXPECT_GT(max_in_device, 0u);
  EXPECT_GE(r[0].service_us.front(), 4000) << "every op takes its latency";
  // 16 clients over 4 slots: the model says about 4 x 4 ms; waiting must show
  // at least 2x.
  EXPECT_GE(r[0].Percentile(0.5) / 4000, 2.0);
  auto m = MediaOf(Stats(), "qd");
  ASSERT_TRUE(m.has_value());
  EXPECT_GT(m->queued_ops(), r[0].ops / 2);
  EXPECT_GT(m->queue_wait_us(), m->queued_ops() * 1000);

  // SIGHUP: a smaller queue applies live and the reload logs old -> new.
  WriteConfig(2);
  ASSERT_TRUE(daemon_->Signal(SIGHUP).ok());
  ASSERT_TRUE(PollUntil(
      [&] {
        return absl::StrContains(daemon_->Stderr(),
                                 "volume qd media: latency_us=4000,queue_depth=4 -> "
                                 "latency_us=4000,queue_depth=2");
      },
      absl::Seconds(10)))
      << daemon_->Stderr();
  m = MediaOf(Stats(), "qd");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->queue_depth(), 2u);
  EXPECT_EQ(m->ops(), 0u) << "a changed model starts its counters over";
  std::vector<Outcome> r2 =
      Drive(daemon_->address(), {{"qd", gdrstore::OpKind::kWrite, 4 * kKiB, 8, absl::Seconds(2)}});
  ASSERT_EQ(r2[0].error, "");
  std::printf("after reload: %.0f ops/s (model %.0f)\n", r2[0].iops(), 2 / 4e-3);
  EXPECT_LE((r2[0].ops - 2) / (500 * r2[0].seconds), kUpperSlack);
  EXPECT_GE(r2[0].iops() / 500, kLowerSlack);
}

// latency_us=2000,p99_us=10000: the daemon's samples come from seed 5, so the
// test knows them.
TEST_F(MediaDeviceTest, LatencyPercentilesFollowTheSeededDistribution) {
  constexpr int kOps = 1600;
  std::vector<Outcome> r =
      Drive(daemon_->address(),
            {{"tail", gdrstore::OpKind::kWrite, 4 * kKiB, 8, absl::Seconds(60), kOps}});
  ASSERT_EQ(r[0].error, "");
  ASSERT_EQ(r[0].ops, static_cast<uint64_t>(kOps));
  LatencySampler sampler(2000, 10000, 5);
  std::vector<double> model(kOps);
  for (double& x : model) x = sampler.NextNs() / 1e3;
  std::sort(model.begin(), model.end());
  const double p50 = r[0].Percentile(0.5), p99 = r[0].Percentile(0.99);
  std::printf(
      "service p50 %.0f us p99 %.0f us; the daemon's samples p50 %.0f "
      "p99 %.0f; "
      "configured 2000 / 10000\n",
      p50, p99, model[kOps / 2], model[kOps * 99 / 100]);
  // No op beats its own sample, so no order statistic beats the samples'
  // (exact).
  for (int k = 0; k < kOps; ++k) {
    ASSERT_GE(r[0].service_us[k], model[k]) << "k=" << k;
  }
  // Against the configured figures: the samples' fit, plus what the daemon adds
  // on top.
  EXPECT_GE(p50 / 2000, 0.9);
  EXPECT_LE(p50 / 2000, 1.5);
  EXPECT_GE(p99 / 10000, 0.8);
  EXPECT_LE(p99 / 10000, 1.5);
}

// GetStats shows the model in effect: a preset's figures with the explicit
// override.
TEST_F(MediaDeviceTest, StatsShowTheEffectiveModel) {
  const auto s = Stats();
  auto m = MediaOf(s, "ssd");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->preset(), "sata-ssd");
  EXPECT_EQ(m->queue_depth(), 8u);
  EXPECT_EQ(m->read_bandwidth_bytes_per_sec(), 560'000'000u);
  EXPECT_EQ(m->write_bandwidth_bytes_per_sec(), 530'000'000u);
  EXPECT_EQ(m->read_iops(), 98'000u);
  EXPECT_EQ(m->write_iops(), 88'000u);
  EXPECT_EQ(m->seed(), 1u);
  m = MediaOf(s, "tail");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->preset(), "");
  EXPECT_EQ(m->latency_us(), 2000u);
  EXPECT_EQ(m->p99_us(), 10000u);
  EXPECT_EQ(m->seed(), 5u);
  // A bad value in a reload is refused naming the option; the running model
  // stays.
  std::ofstream(config_, std::ios::trunc) << "volume = [\"rw=64MiB,queue_depth=lots\"]\n";
  ASSERT_TRUE(daemon_->Signal(SIGHUP).ok());
  ASSERT_TRUE(
      PollUntil([&] { return absl::StrContains(daemon_->Stderr(), "queue_depth 'lots' must be"); },
                absl::Seconds(10)))
      << daemon_->Stderr();
  m = MediaOf(Stats(), "ssd");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->preset(), "sata-ssd");
}

}  // namespace
}  // namespace gdr::integ
