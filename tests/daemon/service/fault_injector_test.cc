// FaultInjector on its own, with a clock the test moves: what rules match, which ops a seeded
// rate or an every-N trigger hits, count and window limits, the decisions of each kind, and the
// bookkeeping (list, clear, configured rules replaced, totals kept after a clear).
#include "daemon/service/fault_injector.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "absl/strings/match.h"
#include "common/fault_spec.h"

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
  return f.Decide(Direction::kStoreToClient, t, volume, 0, 4096, c);
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
  FaultDecision d = Get(f);
  EXPECT_EQ(d.hold_until, clock.now + absl::Milliseconds(250));
  clock.now += absl::Milliseconds(100);
  EXPECT_EQ(Get(f).hold_until, clock.now + absl::Milliseconds(150));
  EXPECT_EQ(f.List().faults(0).remaining_ms(), 150);
  clock.now += absl::Milliseconds(150);
  EXPECT_EQ(Get(f).hold_until, absl::InfinitePast());
  EXPECT_FALSE(f.List().faults(0).active());

  ASSERT_TRUE(f.Add(Spec("kind=stall,delay=40ms,every=2"), "config").ok());
  EXPECT_EQ(Get(f).hold_until, absl::InfinitePast());
  EXPECT_EQ(Get(f).hold_until, clock.now + absl::Milliseconds(40));
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
  EXPECT_FALSE(
      f.Decide(Direction::kClientToStore, TransportKind::kTcp, "v0", 0, 1, trainer).error.ok());
  EXPECT_TRUE(
      f.Decide(Direction::kClientToStore, TransportKind::kTcp, "v0", 0, 1, kAnon).error.ok());
  // drop-link: the client named by its address, and tcp only.
  EXPECT_EQ(Get(f, "v0", TransportKind::kTcp, far).transport, InjectedFault::kDropLink);
  EXPECT_EQ(Get(f, "v0", TransportKind::kRc, far).transport, InjectedFault::kNone);
  EXPECT_EQ(Get(f, "v0", TransportKind::kTcp, kAnon).transport, InjectedFault::kNone);
  // qp-error: rc ops on v1.
  EXPECT_EQ(Get(f, "v1", TransportKind::kRc).transport, InjectedFault::kQpError);
  EXPECT_EQ(Get(f, "v1", TransportKind::kTcp).transport, InjectedFault::kNone);
  // corrupt: gets only.
  EXPECT_TRUE(Get(f, "v2").corrupt.has_value());
  EXPECT_FALSE(f.Decide(Direction::kClientToStore, TransportKind::kTcp, "v2", 0, 1, kAnon)
                   .corrupt.has_value());
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

TEST(FaultInjectorTest, PeerHostDropsThePort) {
  EXPECT_EQ(PeerHost("ipv4:127.0.0.1:4242"), "127.0.0.1");
  EXPECT_EQ(PeerHost("ipv6:[::1]:4242"), "[::1]");
  EXPECT_EQ(PeerHost("unix:/run/x.sock"), "unix:/run/x.sock");
}

}  // namespace
}  // namespace gdr
