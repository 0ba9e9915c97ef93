// Unit tests of simulated media timing (daemon/media_timing.h) and of the delay queue that
// holds completions until the media is done (daemon/delay_queue.h).
#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "daemon/store/delay_queue.h"
#include "daemon/store/media_timing.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

TEST(MediaModelTest, OffMeansNow) {
  MediaModel m;
  const absl::Time t = absl::FromUnixSeconds(1000);
  EXPECT_EQ(m.Reserve(1 << 30, t), t);
}

TEST(MediaModelTest, LatencyOnlyOverlaps) {
  MediaModel m;
  m.Set({250, 0});
  const absl::Time t = absl::FromUnixSeconds(1000);
  EXPECT_EQ(m.Reserve(4096, t), t + absl::Microseconds(250));
  EXPECT_EQ(m.Reserve(4096, t), t + absl::Microseconds(250));  // no queueing without bandwidth
}

TEST(MediaModelTest, BandwidthQueuesOpsBehindEachOther) {
  MediaModel m;
  m.Set({100, 1000000});  // 1 MB/s: 1000 bytes take 1 ms
  const absl::Time t = absl::FromUnixSeconds(1000);
  EXPECT_EQ(m.Reserve(1000, t), t + absl::Milliseconds(1) + absl::Microseconds(100));
  EXPECT_EQ(m.Reserve(1000, t), t + absl::Milliseconds(2) + absl::Microseconds(100));
  // After the device went idle, a new op starts fresh.
  const absl::Time later = t + absl::Seconds(5);
  EXPECT_EQ(m.Reserve(2000, later), later + absl::Milliseconds(2) + absl::Microseconds(100));
  m.Set({});
  EXPECT_EQ(m.Reserve(2000, later), later);
}

TEST(MediaTimingTest, FindsByName) {
  MediaTiming mt({{"a", {1, 0}}, {"b", {}}});
  ASSERT_NE(mt.Find("a"), nullptr);
  EXPECT_EQ(mt.Find("a")->settings().latency_us, 1u);
  EXPECT_EQ(mt.Find("zz"), nullptr);
}

TEST(DelayQueueTest, RunsInDeadlineOrderNotBefore) {
  DelayQueue q;
  absl::Mutex mu;
  std::vector<int> order;
  std::vector<absl::Duration> early;
  absl::Notification done;
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

TEST(DelayQueueTest, ShutdownRunsPendingEarlyAndLaterOnCaller) {
  DelayQueue q;
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) q.RunAt(absl::Now() + absl::Hours(1), [&] { ran++; });
  EXPECT_EQ(q.pending(), 100u);
  q.Shutdown();
  EXPECT_EQ(ran.load(), 100);
  q.RunAt(absl::Now() + absl::Hours(1), [&] { ran++; });
  EXPECT_EQ(ran.load(), 101);
}

TEST(DelayQueueTest, StuckCallbackFailsHealth) {
  DelayQueue q;
  absl::Notification in, out;
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
