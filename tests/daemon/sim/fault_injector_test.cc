// FaultInjector on its own, with a clock the test moves: what rules match, which ops a seeded
// rate or an every-N trigger hits, count and window limits, the decisions of each kind, and the
// bookkeeping (list, clear, configured rules replaced, totals kept after a clear).
#include "daemon/sim/fault_injector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/wire/fault_spec.h"

namespace gdr {
namespace {

namespace v1 = gdrstore::v1;

v1::FaultSpec Spec(const std::string& text) {
  absl::StatusOr<v1::FaultSpec> s = ParseFaultSpec(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.ok() ? *s : v1::FaultSpec();
}

struct Clock {
  absl::Time now = absl::FromUnixSeconds(1000);
  std::function<absl::Time()> fn() {
    return [this] { return now; };
  }
};

constexpr FaultClient kAnon{"", "ipv4:127.0.0.1:4242"};

FaultDecision Get(FaultInjector& f, const std::string& volume = "v0",
                  TransportKind t = TransportKind::kTcp, FaultClient c = kAnon) {
  return f.Decide(absl::Now(), Direction::kStoreToClient, t, volume, 0, 4096, c);
}

// Polls `done` for up to 30 s (for what another thread finishes just after it signals).
bool PollUntilTrue(const std::function<bool()>& done) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// A 1-byte put on tcp, now.
FaultDecision Put(FaultInjector& f, const std::string& volume, FaultClient c) {
  return f.Decide(absl::Now(), Direction::kClientToStore, TransportKind::kTcp, volume, 0, 1, c);
}

// A get that started at `start`.
FaultDecision GetAt(FaultInjector& f, absl::Time start) {
  return f.Decide(start, Direction::kStoreToClient, TransportKind::kTcp, "v0", 0, 4096, kAnon);
}

std::vector<bool> ErrorPattern(uint64_t seed, int n) {
  FaultInjector f(seed);
  EXPECT_TRUE(f.Add(Spec("kind=error,rate=0.3"), "config").ok());
  std::vector<bool> hits;
  for (int i = 0; i < n; ++i) hits.push_back(!Get(f).error.ok());
  return hits;
}

TEST(FaultInjectorTest, TheSameSeedHitsTheSameOpsAndAnotherSeedOthers) {
  const std::vector<bool> a = ErrorPattern(7, 2000), b = ErrorPattern(7, 2000);
  const std::vector<bool> c = ErrorPattern(8, 2000);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(FaultInjectorTest, ARateHitsItsShareOfOpsWithinFourSigma) {
  FaultInjector f(1);
  ASSERT_TRUE(f.Add(Spec("kind=error,rate=0.25,code=DATA_LOSS"), "config").ok());
  const int n = 20000;
  int hits = 0;
  for (int i = 0; i < n; ++i) {
    FaultDecision d = Get(f);
    if (d.error.ok()) continue;
    ++hits;
    EXPECT_EQ(d.error.code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(d.error.message(), "injected fault 1")) << d.error;
  }
  const double sigma = std::sqrt(n * 0.25 * 0.75);
  EXPECT_NEAR(hits, n * 0.25, 4 * sigma);
  v1::ListFaultsResponse l = f.List();
  ASSERT_EQ(l.faults_size(), 1);
  EXPECT_EQ(l.faults(0).matched(), static_cast<uint64_t>(n));
  EXPECT_EQ(l.faults(0).hits(), static_cast<uint64_t>(hits));
}

TEST(FaultInjectorTest, EveryNthMatchingOpIsHitUntilTheCountIsReached) {
  FaultInjector f(1);
  ASSERT_TRUE(f.Add(Spec("kind=error,volume=v0,every=4,count=3"), "admin t").ok());
  std::vector<int> hit_at;
  for (int i = 1; i <= 40; ++i) {
    // Ops on another volume do not count towards every=.
    EXPECT_TRUE(Get(f, "other").error.ok());
    if (!Get(f).error.ok()) hit_at.push_back(i);
  }
  EXPECT_EQ(hit_at, (std::vector<int>{4, 8, 12}));
  v1::ListFaultsResponse l = f.List();
  EXPECT_FALSE(l.faults(0).active());
  EXPECT_EQ(l.faults(0).hits(), 3u);
}

TEST(FaultInjectorTest, AWindowEndsTheRuleAndAStallWithoutDelayHoldsToItsEnd) {
  Clock clock;
  FaultInjector f(1, clock.fn());
  ASSERT_TRUE(f.Add(Spec("kind=stall,for=250ms"), "config").ok());
  FaultDecision d = GetAt(f, clock.now);
  EXPECT_EQ(d.hold_until, clock.now + absl::Milliseconds(250));
  clock.now += absl::Milliseconds(100);
  EXPECT_EQ(GetAt(f, clock.now).hold_until, clock.now + absl::Milliseconds(150));
  EXPECT_EQ(f.List().faults(0).remaining_ms(), 150);
  clock.now += absl::Milliseconds(150);
  EXPECT_EQ(GetAt(f, clock.now).hold_until, absl::InfinitePast());
  EXPECT_FALSE(f.List().faults(0).active());

  ASSERT_TRUE(f.Add(Spec("kind=stall,delay=40ms,every=2"), "config").ok());
  EXPECT_EQ(GetAt(f, clock.now).hold_until, absl::InfinitePast());
  EXPECT_EQ(GetAt(f, clock.now).hold_until, clock.now + absl::Milliseconds(40));
}

// Issue 29 (12): the daemon answered a 300 ms stall after 299.96 ms of service time, because the
// hold was measured from the injector's own clock reading, taken before the op's start. The
// hold is measured from the start the op hands in, whatever the injector's clock says.
TEST(FaultInjectorTest, AStallIsMeasuredFromTheStartTheOpHandsIn) {
  Clock clock;
  FaultInjector f(1, clock.fn());
  ASSERT_TRUE(f.Add(Spec("kind=stall,delay=300ms"), "config").ok());
  const absl::Time start = clock.now + absl::Microseconds(41);  // the op started later
  FaultDecision d = GetAt(f, start);
  EXPECT_EQ(d.hold_until, start + absl::Milliseconds(300));
  ASSERT_NE(d.stall, nullptr);
  EXPECT_EQ(d.stall->until(), start + absl::Milliseconds(300));
  // A rule's window is judged at the op's start too: an op that started as a for= window
  // closed is not held, though the injector's clock is still inside the window.
  ASSERT_TRUE(f.Clear({}, true).ok());
  ASSERT_TRUE(f.Add(Spec("kind=stall,for=100ms"), "config").ok());
  EXPECT_EQ(GetAt(f, clock.now + absl::Milliseconds(99)).hold_until,
            clock.now + absl::Milliseconds(100));
  EXPECT_EQ(GetAt(f, clock.now + absl::Milliseconds(100)).hold_until, absl::InfinitePast());
}

// A cleared stall rule lets go of the ops it holds: queued ones are brought forward to what
// their other rules (and the media floor) leave, ones still transferring are not held at all.
TEST(FaultInjectorTest, ClearingAStallLetsGoOfTheOpsItHolds) {
  FaultInjector f(1);
  absl::Notification answered;  // before the queue: it outlives the queue's thread
  DelayQueue q;
  ASSERT_TRUE(f.Add(Spec("kind=stall,delay=1h"), "admin t").ok());  // rule 1
  const absl::Time start = absl::Now();
  FaultDecision held = GetAt(f, start);
  ASSERT_NE(held.stall, nullptr);
  held.stall->Arm(&q, absl::InfinitePast(), [&] { answered.Notify(); });
  // The op's path lets go of its hold once armed (the transport drops its completion callback
  // once called): the queued answer and the rule must still reach it.
  std::weak_ptr<StallHold> armed = held.stall;
  held.stall.reset();
  EXPECT_FALSE(armed.expired());
  // Caught before the clear, still transferring (not armed yet) when it comes.
  FaultDecision in_flight = GetAt(f, start);
  ASSERT_NE(in_flight.stall, nullptr);
  EXPECT_EQ(q.pending(), 1u);
  ASSERT_TRUE(f.Clear({1}, false).ok());
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(in_flight.stall->until(), absl::InfinitePast());
  // Answered: the hold goes with the queued answer (nothing keeps it once the op is done).
  ASSERT_TRUE(PollUntilTrue([&] { return armed.expired(); }));

  // Two rules hold one op: clearing one leaves the other's hold; the media floor stays.
  ASSERT_TRUE(f.Add(Spec("kind=stall,delay=1h"), "admin t").ok());   // rule 2
  ASSERT_TRUE(f.Add(Spec("kind=stall,delay=30m"), "admin t").ok());  // rule 3
  FaultDecision both = GetAt(f, start);
  ASSERT_NE(both.stall, nullptr);
  EXPECT_EQ(both.stall->until(), start + absl::Hours(1));
  ASSERT_TRUE(f.Clear({2}, false).ok());
  EXPECT_EQ(both.stall->until(), start + absl::Minutes(30));
  absl::Notification floor_done;
  both.stall->Arm(&q, start + absl::Hours(2), [&] { floor_done.Notify(); });
  ASSERT_TRUE(f.Clear({}, true).ok());
  EXPECT_EQ(both.stall->until(), absl::InfinitePast());
  EXPECT_EQ(q.pending(), 1u) << "released to the media floor, not before it";
  q.Shutdown();
  EXPECT_TRUE(floor_done.HasBeenNotified());
}

// SIGHUP: a configured stall that is gone from the configuration lets go of its ops; one of the
// same text stays and keeps holding (and a later clear of it lets go).
TEST(FaultInjectorTest, AStallDroppedFromTheConfigurationLetsGoOfItsOps) {
  FaultInjector f(1);
  absl::Notification answered;  // before the queue: it outlives the queue's thread
  DelayQueue q;
  ASSERT_TRUE(
      f.ReplaceConfigured({Spec("kind=stall,delay=1h"), Spec("kind=stall,delay=2h")}).ok());
  const absl::Time start = absl::Now();
  FaultDecision d = GetAt(f, start);
  ASSERT_NE(d.stall, nullptr);
  d.stall->Arm(&q, absl::InfinitePast(), [&] { answered.Notify(); });
  EXPECT_EQ(d.stall->until(), start + absl::Hours(2));
  // The 2h rule goes; the 1h one stays (a new rule of the same text) and still holds.
  ASSERT_TRUE(
      f.ReplaceConfigured({Spec("kind=stall,delay=1h"), Spec("kind=error,volume=x")}).ok());
  EXPECT_EQ(d.stall->until(), start + absl::Hours(1));
  EXPECT_FALSE(answered.HasBeenNotified());
  v1::ListFaultsResponse l = f.List();
  ASSERT_EQ(l.faults_size(), 2);
  EXPECT_EQ(l.faults(0).text(), "kind=stall,delay=1h");
  ASSERT_TRUE(f.Clear({l.faults(0).id()}, false).ok());
  EXPECT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(d.stall->until(), absl::InfinitePast());
}

TEST(FaultInjectorTest, RulesMatchVolumeDirectionClientAndTheTransportTheirKindNeeds) {
  FaultInjector f(1);
  ASSERT_TRUE(f.Add(Spec("kind=error,ops=put,client=trainer"), "config").ok());
  ASSERT_TRUE(f.Add(Spec("kind=drop-link,client=10.0.0.7"), "config").ok());
  ASSERT_TRUE(f.Add(Spec("kind=qp-error,volume=v1"), "config").ok());
  ASSERT_TRUE(f.Add(Spec("kind=corrupt,volume=v2"), "config").ok());
  const FaultClient trainer{"trainer", "ipv4:10.0.0.9:1"};
  const FaultClient far{"", "ipv4:10.0.0.7:5555"};
  // error: puts of the label "trainer" only.
  EXPECT_TRUE(Get(f, "v0", TransportKind::kTcp, trainer).error.ok());
  EXPECT_FALSE(Put(f, "v0", trainer).error.ok());
  EXPECT_TRUE(Put(f, "v0", kAnon).error.ok());
  // drop-link: the client named by its address, and tcp only.
  EXPECT_EQ(Get(f, "v0", TransportKind::kTcp, far).transport, InjectedFault::kBreakPath);
  EXPECT_EQ(Get(f, "v0", TransportKind::kRc, far).transport, InjectedFault::kNone);
  EXPECT_EQ(Get(f, "v0", TransportKind::kTcp, kAnon).transport, InjectedFault::kNone);
  // qp-error: rc ops on v1.
  EXPECT_EQ(Get(f, "v1", TransportKind::kRc).transport, InjectedFault::kBreakPath);
  EXPECT_EQ(Get(f, "v1", TransportKind::kTcp).transport, InjectedFault::kNone);
  // corrupt: gets only.
  EXPECT_TRUE(Get(f, "v2").corrupt.has_value());
  EXPECT_FALSE(Put(f, "v2", kAnon).corrupt.has_value());
}

TEST(FaultInjectorTest, ClearListsAndConfiguredRulesFollowTheConfiguration) {
  FaultInjector f(3);
  ASSERT_TRUE(f.Add(Spec("kind=error,volume=v0"), "config").ok());
  auto admin = f.Add(Spec("kind=error,volume=v1"), "admin ops");
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ(admin->id(), 2u);
  EXPECT_EQ(admin->origin(), "admin ops");
  EXPECT_FALSE(Get(f, "v0").error.ok());
  EXPECT_FALSE(Get(f, "v1").error.ok());
  // An unknown id removes nothing.
  absl::StatusOr<uint64_t> bad = f.Clear({2, 99}, false);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "99"));
  EXPECT_EQ(f.List().faults_size(), 2);
  // SIGHUP with other configured rules: the admin rule stays.
  ASSERT_TRUE(f.ReplaceConfigured({Spec("kind=error,volume=v2")}).ok());
  v1::ListFaultsResponse l = f.List();
  ASSERT_EQ(l.faults_size(), 2);
  EXPECT_EQ(l.faults(0).text(), "kind=error,volume=v1");
  EXPECT_EQ(l.faults(1).text(), "kind=error,volume=v2");
  EXPECT_TRUE(Get(f, "v0").error.ok());
  // A bad spec in the configuration changes nothing.
  v1::FaultSpec broken;
  broken.set_kind(v1::FAULT_ERROR);
  broken.set_rate(2);
  EXPECT_EQ(f.ReplaceConfigured({broken}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.List().faults_size(), 2);
  absl::StatusOr<uint64_t> all = f.Clear({}, true);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, 2u);
  EXPECT_TRUE(Get(f, "v1").error.ok());
  // Totals outlive the rules.
  v1::GetStatsResponse stats;
  f.FillStats(&stats);
  ASSERT_EQ(stats.faults_size(), 2);
  EXPECT_EQ(stats.faults(0).kind(), "error");
  EXPECT_EQ(stats.faults(0).volume(), "v0");
  EXPECT_EQ(stats.faults(0).hits(), 1u);
  EXPECT_EQ(stats.faults(1).volume(), "v1");
}

TEST(FaultInjectorTest, RailDownGoesToTheRailsOnceWhenSet) {
  FaultInjector none(1);
  EXPECT_EQ(none.Add(Spec("kind=rail-down,rail=mlx5_1,for=2s"), "config").status().code(),
            absl::StatusCode::kFailedPrecondition);
  FaultInjector f(1);
  std::vector<std::pair<std::string, absl::Duration>> calls;
  f.set_rail_down([&](const std::string& rail, absl::Duration d) {
    if (rail != "mlx5_1") return absl::NotFoundError("no rail 'x' (rails: mlx5_1)");
    calls.emplace_back(rail, d);
    return absl::OkStatus();
  });
  EXPECT_EQ(f.Add(Spec("kind=rail-down,rail=mlx5_9,for=2s"), "config").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(f.Add(Spec("kind=rail-down,rail=mlx5_1,for=2s"), "admin a").ok());
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].second, absl::Seconds(2));
  EXPECT_EQ(Get(f).transport, InjectedFault::kNone);  // it matches no op
  v1::GetStatsResponse stats;
  f.FillStats(&stats);
  ASSERT_EQ(stats.faults_size(), 1);
  EXPECT_EQ(stats.faults(0).rail(), "mlx5_1");
  EXPECT_EQ(stats.faults(0).volume(), "");
}

}  // namespace
}  // namespace gdr
