// Unit tests of the simulated device (daemon/sim/media_timing.h: queue depth,
// IOPS, bandwidth per direction, seeded latency samples) on synthetic times,
// and of the delay queue that holds completions until the media is done
// (daemon/sim/delay_queue.h).
#include <algorithm>
#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "daemon/sim/delay_queue.h"
#include "daemon/sim/latency_sampler.h"
#include "daemon/sim/media_timing.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

// A get reads the simulated device, a put writes it.
constexpr Direction kRead = Direction::kStoreToClient;
constexpr Direction kWrite = Direction::kClientToStore;

MediaSettings Latency(uint64_t us) {
  MediaSettings s;
  s.latency_us = us;
  return s;
}

TEST(MediaModelTest, OffMeansNow) {
  MediaModel m;
  const absl::Time t = absl::FromUnixSeconds(1000);
  EXPECT_EQ(m.Reserve(kRead, 1 << 30, t), t);
}

TEST(MediaModelTest, LatencyOnlyOverlaps) {
  MediaModel m;
  m.Set(Latency(250));
  const absl::Time t = absl::FromUnixSeconds(1000);
  EXPECT_EQ(m.Reserve(kRead, 4096, t), t + absl::Microseconds(250));
  EXPECT_EQ(m.Reserve(kWrite, 4096, t),
            t + absl::Microseconds(250));  // nothing to queue for
  EXPECT_EQ(m.counters(t).queued_ops, 0u);
}

// `bandwidth` keeps its meaning: one channel that reads and writes share.
TEST(MediaModelTest, SharedBandwidthQueuesOpsBehindEachOther) {
  MediaModel m;
  MediaSettings s = Latency(100);
  s.bandwidth = 1'000'000;  // 1000 bytes take 1 ms
  m.Set(s);
  const absl::Time t = absl::FromUnixSeconds(1000);
  EXPECT_EQ(m.Reserve(kRead, 1000, t), t + absl::Milliseconds(1) + absl::Microseconds(100));
  EXPECT_EQ(m.Reserve(kWrite, 1000, t), t + absl::Milliseconds(2) + absl::Microseconds(100));
  // After the device went idle, a new op starts fresh.
  const absl::Time later = t + absl::Seconds(5);
  EXPECT_EQ(m.Reserve(kRead, 2000, later), later + absl::Milliseconds(2) + absl::Microseconds(100));
  m.Set({});
  EXPECT_EQ(m.Reserve(kRead, 2000, later), later);
}

TEST(MediaModelTest, ReadAndWriteBandwidthAreSeparateChannels) {
  MediaModel m;
  MediaSettings s;
  s.read_bandwidth = 2'000'000;   // 1000 bytes: 0.5 ms
  s.write_bandwidth = 1'000'000;  // 1000 bytes: 1 ms
  m.Set(s);
  const absl::Time t = absl::FromUnixSeconds(1000);
  EXPECT_EQ(m.Reserve(kRead, 1000, t), t + absl::Microseconds(500));
  EXPECT_EQ(m.Reserve(kWrite, 1000, t),
            t + absl::Milliseconds(1));  // not behind the read
  EXPECT_EQ(m.Reserve(kRead, 1000, t),
            t + absl::Milliseconds(1));  // behind the first read
  EXPECT_EQ(m.Reserve(kWrite, 1000, t), t + absl::Milliseconds(2));
  // A shared limit on top binds both: each op takes the slower of its two
  // channels.
  s.bandwidth = 500'000;  // 1000 bytes: 2 ms
  m.Set(s);
  EXPECT_EQ(m.Reserve(kRead, 1000, t), t + absl::Milliseconds(2));
  EXPECT_EQ(m.Reserve(kWrite, 1000, t), t + absl::Milliseconds(4));
}

TEST(MediaModelTest, QueueDepthHoldsLaterOpsUntilASlotFrees) {
  MediaModel m;
  MediaSettings s = Latency(100);
  s.queue_depth = 2;
  m.Set(s);
  const absl::Time t = absl::FromUnixSeconds(1000);
  const absl::Duration us = absl::Microseconds(1);
  std::vector<absl::Time> done;
  for (int i = 0; i < 5; ++i) done.push_back(m.Reserve(kRead, 4096, t));
  EXPECT_EQ(done, (std::vector<absl::Time>{t + 100 * us, t + 100 * us, t + 200 * us, t + 200 * us,
                                           t + 300 * us}));
  MediaCounters c = m.counters(t);
  EXPECT_EQ(c.ops, 5u);
  EXPECT_EQ(c.queued_ops, 3u);
  EXPECT_EQ(c.wait_ns, 400'000u);  // 100 + 100 + 200 us before a slot
  EXPECT_EQ(c.in_device, 2u);
  EXPECT_EQ(m.counters(t + 250 * us).in_device, 1u);
  EXPECT_EQ(m.counters(t + 300 * us).in_device, 0u);
  // An op arriving once the device has drained takes no wait.
  EXPECT_EQ(m.Reserve(kWrite, 4096, t + absl::Seconds(1)), t + absl::Seconds(1) + 100 * us);
  EXPECT_EQ(m.counters(t).queued_ops, 3u);
}

TEST(MediaModelTest, IopsLimitsPaceStarts) {
  MediaModel m;
  MediaSettings s;
  s.iops = 1000;      // one op per ms, either direction
  s.read_iops = 250;  // one read per 4 ms
  m.Set(s);
  const absl::Time t = absl::FromUnixSeconds(1000);
  const absl::Duration ms = absl::Milliseconds(1);
  EXPECT_EQ(m.Reserve(kRead, 1, t), t);
  EXPECT_EQ(m.Reserve(kWrite, 1, t), t + ms);
  EXPECT_EQ(m.Reserve(kWrite, 1, t), t + 2 * ms);
  EXPECT_EQ(m.Reserve(kRead, 1, t), t + 4 * ms);  // the read limit binds
  EXPECT_EQ(m.Reserve(kWrite, 1, t), t + 5 * ms);
  // Over a long run the rate is the limit's, to the op.
  const absl::Time later = t + absl::Seconds(10);
  absl::Time last;
  for (int i = 0; i < 1000; ++i) last = m.Reserve(kWrite, 1, later);
  EXPECT_EQ(last, later + 999 * ms);
}

TEST(MediaModelTest, SeededLatenciesRepeatAndReloadOfSameSettingsKeepsState) {
  MediaSettings s = Latency(1000);
  s.p99_us = 5000;
  s.queue_depth = 4;
  MediaModel a, b;
  a.Set(s);
  b.Set(s);
  const absl::Time t = absl::FromUnixSeconds(1000);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(a.Reserve(kRead, 4096, t), b.Reserve(kRead, 4096, t)) << i;
  }
  a.Set(s);  // unchanged: counters and queue stay
  EXPECT_EQ(a.counters(t).ops, 100u);
  s.seed = 2;
  a.Set(s);  // changed: a fresh device
  EXPECT_EQ(a.counters(t).ops, 0u);
  EXPECT_EQ(a.counters(t).in_device, 0u);
}

// Percentiles of many seeded samples against the configured median and p99. The
// sequence is fixed by the seed, so the bounds are checks of the fit, not of
// luck.
TEST(LatencySamplerTest, LogNormalMatchesMedianAndP99) {
  for (uint64_t seed : {1ull, 42ull, 0xdeadbeefull}) {
    LatencySampler sampler(100, 1000, seed);
    std::vector<int64_t> ns(200'000);
    for (int64_t& x : ns) x = sampler.NextNs();
    std::sort(ns.begin(), ns.end());
    const double p50 = ns[ns.size() / 2] / 1e3;
    const double p99 = ns[ns.size() * 99 / 100] / 1e3;
    EXPECT_NEAR(p50 / 100, 1.0, 0.02) << "seed " << seed << " p50 " << p50;
    EXPECT_NEAR(p99 / 1000, 1.0, 0.04) << "seed " << seed << " p99 " << p99;
    EXPECT_GT(ns.front(), 0);
    EXPECT_LE(ns.back(), 1000 * 1000 * LatencySampler::kTailCap);
    EXPECT_GT(ns.back(), 1000 * 1000) << "a long tail reaches past p99";
  }
}

TEST(LatencySamplerTest, FixedAndSeeded) {
  LatencySampler fixed(250, 0, 7);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(fixed.NextNs(), 250'000);
  LatencySampler same(250, 250, 7);  // p99 == median: no spread
  EXPECT_EQ(same.NextNs(), 250'000);
  LatencySampler a(100, 400, 7), b(100, 400, 7), c(100, 400, 8);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const int64_t x = a.NextNs();
    EXPECT_EQ(x, b.NextNs());
    differs |= x != c.NextNs();
  }
  EXPECT_TRUE(differs) << "another seed, another sequence";
}

TEST(MediaTimingTest, FindsByName) {
  MediaTiming mt({{"a", Latency(1)}, {"b", {}}});
  ASSERT_NE(mt.Find("a"), nullptr);
  EXPECT_EQ(mt.Find("a")->settings().latency_us, 1u);
  EXPECT_EQ(mt.Find("zz"), nullptr);
}

TEST(DelayQueueTest, RunsInDeadlineOrderNotBefore) {
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<absl::Duration> early;
  absl::Notification done;
  DelayQueue q;  // last: its thread ends before what its callbacks touch goes
  const absl::Time t0 = absl::Now();
  for (int i : {3, 1, 2}) {
    const absl::Time when = t0 + absl::Milliseconds(20 * i);
    q.RunAt(when, [&, i, when] {
      absl::MutexLock lock(&mu);
      order.push_back(i);
      const absl::Time now = absl::Now();
      if (now < when) early.push_back(when - now);
      if (order.size() == 3) done.Notify();
    });
  }
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_TRUE(early.empty()) << "a callback ran before its time";
  EXPECT_TRUE(q.CheckHealth(absl::Seconds(5)).ok());
}

// A cleared stall brings its held answers forward: Advance moves a queued callback earlier
// (never later), once; a callback that ran is left alone.
TEST(DelayQueueTest, AdvanceBringsACallbackForwardOnlyWhileQueued) {
  absl::Notification early, later;
  DelayQueue q;
  const DelayQueue::Handle h = q.RunAt(absl::Now() + absl::Hours(1), [&] { early.Notify(); });
  const DelayQueue::Handle other = q.RunAt(absl::Now() + absl::Hours(1), [&] { later.Notify(); });
  ASSERT_NE(h, 0u);
  EXPECT_TRUE(q.Advance(other, absl::Now() + absl::Hours(2)));  // later: ignored
  EXPECT_TRUE(q.Advance(h, absl::Now()));
  EXPECT_TRUE(early.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // Ran once, and only it: the other keeps its hour, its entry left where it was.
  EXPECT_EQ(q.pending(), 1u);
  EXPECT_FALSE(later.HasBeenNotified());
  EXPECT_FALSE(q.Advance(h, absl::Now()));
  q.Shutdown();
  EXPECT_TRUE(later.HasBeenNotified());
  EXPECT_EQ(q.pending(), 0u);
}

TEST(DelayQueueTest, ShutdownRunsPendingEarlyAndLaterOnCaller) {
  std::atomic<int> ran{0};
  DelayQueue q;
  for (int i = 0; i < 100; ++i) q.RunAt(absl::Now() + absl::Hours(1), [&] { ran++; });
  EXPECT_EQ(q.pending(), 100u);
  q.Shutdown();
  EXPECT_EQ(ran.load(), 100);
  q.RunAt(absl::Now() + absl::Hours(1), [&] { ran++; });
  EXPECT_EQ(ran.load(), 101);
}

TEST(DelayQueueTest, StuckCallbackFailsHealth) {
  // Declared before the queue, so they outlive its thread: after out.Notify() the callback may
  // still be returning from out's wait when the test body ends (ASan: stack-use-after-scope).
  absl::Notification in, out;
  DelayQueue q;
  q.RunAt(absl::Now(), [&] {
    in.Notify();
    out.WaitForNotification();
  });
  in.WaitForNotification();
  // The probe must report the stall once it has lasted longer than the bound.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (q.CheckHealth(absl::Milliseconds(200)).ok() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_FALSE(q.CheckHealth(absl::Milliseconds(200)).ok());
  out.Notify();
}

}  // namespace
}  // namespace gdr
