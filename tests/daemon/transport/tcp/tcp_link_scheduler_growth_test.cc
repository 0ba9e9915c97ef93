// Unit tests of how a destination's links grow past its share (links_per_target) up to
// max_links_per_target while the pool has room, and give way when others arrive
// (daemon/transport/tcp/tcp_link_scheduler.h), over fake links and a test clock.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/transport/tcp/fake_tcp_pool.h"

namespace gdr::tcp_link_scheduler_test {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// A destination alone grows by one link for each chunk that finds all its links full, up to
// max_links_per_target and no further; the chunks past that spread over the links it has.
TEST(TcpLinkGrowthTest, ALoneDestinationGrowsToItsCapUnderBulkAndNoFurther) {
  PoolDriver pool(Options(kMiB, 2, 64));
  ASSERT_EQ(pool.options.max_links_per_target, 16u) << "the default";
  for (uint32_t i = 1; i <= 16; ++i) {
    pool.Submit("a", kMiB);  // unanswered: it keeps its link full
    EXPECT_EQ(pool.scheduler.links_of("a"), i);
  }
  RecordingPlan more = pool.Submit("a", 64 * kMiB);
  EXPECT_EQ(pool.scheduler.links(), 16u);
  EXPECT_EQ(LinksOf(more).size(), 16u);
  for (auto& l : pool.opened) EXPECT_EQ(l->bytes, 5 * kMiB);
  EXPECT_EQ(pool.scheduler.growing(), 0u) << "at its cap a destination asks for nothing";
  EXPECT_EQ(pool.scheduler.handovers(), 0u);

  // One op of many chunks opens them at once.
  PoolDriver one(Options(kMiB, 2, 64));
  RecordingPlan big = one.Submit("a", 40 * kMiB);
  EXPECT_EQ(LinksOf(big).size(), 16u);
  EXPECT_EQ(one.scheduler.links(), 16u);
}

// An op is cut into the size its client asked for (ChunkOf), and links count as full at that
// size: a destination asking for 4 MiB pieces puts a 16 MiB op on four links, not sixteen, and
// grows no further while each of its links carries one such piece; another keeps the default.
TEST(TcpLinkGrowthTest, AnOpIsCutIntoThePiecesItsClientAskedFor) {
  PoolDriver pool(Options(kMiB, 2, 64), [](const TransferOp& op) -> uint64_t {
    return op.volume == "gpu" ? 4 * kMiB : kMiB;
  });
  RecordingPlan gpu = pool.Submit("gpu", 16 * kMiB + 5);
  ASSERT_EQ(gpu.placed.size(), 5u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(gpu.placed[i].offset, i * 4 * kMiB);
    EXPECT_EQ(gpu.placed[i].length, 4 * kMiB);
  }
  EXPECT_EQ(gpu.placed[4].length, 5u);
  EXPECT_EQ(pool.scheduler.links_of("gpu"), 5u);
  EXPECT_EQ(gpu.begun, (std::vector<std::pair<std::string, uint32_t>>{{"gpu", 5}}));

  RecordingPlan host = pool.Submit("host", 16 * kMiB);
  EXPECT_EQ(host.placed.size(), 16u);
  EXPECT_EQ(LinksOf(host).size(), 16u);
  for (const Placed& p : host.placed) EXPECT_EQ(p.length, kMiB);
}

// Small ops never fill a link's chunk, so they keep to one link, before and after bulk opened
// the destination's whole cap.
TEST(TcpLinkGrowthTest, SmallOpsStayOnOneLinkWhateverTheCap) {
  PoolDriver pool(Options(kMiB, 2, 64));
  auto small_rounds = [&] {
    std::map<FakeLink*, int> per_link;
    for (int round = 0; round < 10; ++round) {
      std::vector<std::pair<std::string, uint64_t>> batch(64, {"a", 4096});
      for (const Placed& p : pool.Submit(batch).placed) ++per_link[p.link];
      pool.CompleteAll();
    }
    return per_link;
  };
  EXPECT_EQ(small_rounds().size(), 1u);
  EXPECT_EQ(pool.scheduler.links(), 1u);
  pool.Submit("a", 32 * kMiB);
  ASSERT_EQ(pool.scheduler.links(), 16u);
  pool.CompleteAll();
  const std::map<FakeLink*, int> after = small_rounds();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after.begin()->second, 640);
}

// The pool is full of a's links when b arrives: one of a's links above its share retires at
// once (no turn ends in this test), b gets it, then its share, then links move one by one until
// both hold half the pool; none moves back.
TEST(TcpLinkGrowthTest, ASecondDestinationTakesTheFirstsExtraLinksWithoutWaitingForATurn) {
  TcpInitiatorOptions o = Options(kMiB, 2, 16);
  o.turn = absl::Hours(1);
  PoolDriver pool(o);
  pool.Submit("a", 64 * kMiB);
  ASSERT_EQ(pool.scheduler.links_of("a"), 16u);
  EXPECT_TRUE(pool.Submit("b", 4 * kMiB).begun.empty());
  EXPECT_EQ(pool.scheduler.retiring(), 1u);
  EXPECT_THAT(pool.CompleteAll(), testing::ElementsAre("b"));
  EXPECT_EQ(pool.scheduler.links_of("b"), 2u) << "its share";
  EXPECT_EQ(pool.scheduler.links_of("a"), 14u);
  EXPECT_EQ(pool.scheduler.handovers(), 2u);
  for (int round = 0; round < 12; ++round) {
    const RecordingPlan plan = pool.Submit({{"a", 16 * kMiB}, {"b", 16 * kMiB}});
    EXPECT_EQ(plan.begun.size(), 2u) << "round " << round;
    pool.Housekeep();
    pool.CompleteAll();
    ASSERT_LE(pool.scheduler.links(), 16u);
  }
  EXPECT_EQ(pool.scheduler.links_of("a"), 8u);
  EXPECT_EQ(pool.scheduler.links_of("b"), 8u);
  EXPECT_EQ(pool.scheduler.handovers(), 8u) << "six moves after the share: none back";
  EXPECT_EQ(pool.scheduler.waiting_ops(), 0u);
  EXPECT_EQ(pool.scheduler.link_errors(), 0u);
}

// An idle link above a destination's share is taken for a newcomer on the spot, inside its
// turn: the newcomer's op starts in the same call.
TEST(TcpLinkGrowthTest, ANewcomerTakesAnIdleLinkAboveAShareAtOnce) {
  TcpInitiatorOptions o = Options(kMiB, 2, 16);
  o.turn = absl::Hours(1);
  PoolDriver pool(o);
  pool.Submit("a", 32 * kMiB);
  ASSERT_EQ(pool.scheduler.links(), 16u);
  pool.CompleteAll();
  RecordingPlan b = pool.Submit("b", 4096);
  ASSERT_EQ(b.begun.size(), 1u);
  EXPECT_EQ(pool.scheduler.links_of("a"), 15u);
  EXPECT_EQ(pool.scheduler.links_of("b"), 1u);
  EXPECT_EQ(pool.scheduler.handovers(), 1u);
  EXPECT_EQ(pool.scheduler.waiting_ops(), 0u);
}

// Fairness with many destinations on a full pool: d0 holds all 16 links, d1..d7 arrive one
// after another, each keeping bulk in flight. No turn ends (turn: an hour), so every link that
// moves is one above a share; each destination ends with its share, 2, none that reached it
// ever drops below it, and every op is placed exactly once.
TEST(TcpLinkGrowthTest, ManyDestinationsOnAFullPoolEachEndUpWithTheirShare) {
  TcpInitiatorOptions o = Options(kMiB, 2, 16);
  o.turn = absl::Hours(1);
  PoolDriver pool(o);
  constexpr int kDests = 8;
  std::map<std::string, int> submitted, placed;
  std::set<std::string> reached_share;
  auto count = [&](const RecordingPlan& p) {
    for (const auto& b : p.begun) ++placed[b.first];
  };
  auto count_all = [&](const std::vector<std::string>& begun) {
    for (const std::string& d : begun) ++placed[d];
  };
  for (int round = 0; round < 80; ++round) {
    const int present = std::min(kDests, 1 + round / 4);
    std::vector<std::pair<std::string, uint64_t>> batch;
    for (int d = 0; d < present; ++d) {
      const std::string dest = "d" + std::to_string(d);
      batch.push_back({dest, 8 * kMiB});
      ++submitted[dest];
    }
    count(pool.Submit(batch));
    count(pool.Housekeep());
    count_all(pool.CompleteAll());
    ASSERT_LE(pool.scheduler.links(), 16u) << "round " << round;
    for (int d = 0; d < present; ++d) {
      const std::string dest = "d" + std::to_string(d);
      const size_t n = pool.scheduler.links_of(dest);
      if (reached_share.contains(dest)) {
        ASSERT_GE(n, 2u) << dest << " lost its share in round " << round;
      }
      if (n >= 2) reached_share.insert(dest);
    }
  }
  for (int d = 0; d < kDests; ++d) {
    const std::string dest = "d" + std::to_string(d);
    EXPECT_EQ(pool.scheduler.links_of(dest), 2u) << dest;
    EXPECT_EQ(placed[dest], submitted[dest]) << dest;
  }
  EXPECT_EQ(pool.scheduler.waiting_ops(), 0u);
  EXPECT_EQ(pool.scheduler.link_errors(), 0u);
}

// Where the shares do not fit the pool, turns go on as before and growing takes nothing: a
// destination that asks for its second link gets none of another's share.
TEST(TcpLinkGrowthTest, AGrowingDestinationTakesNoLinkOfAnothersShare) {
  TcpInitiatorOptions o = Options(kMiB, 2, 4);
  o.turn = absl::Milliseconds(10);
  PoolDriver pool(o);
  pool.Submit("a", 8 * kMiB);
  ASSERT_EQ(pool.scheduler.links_of("a"), 4u);
  // b takes a's two links above its share, at once.
  EXPECT_TRUE(pool.Submit("b", 8 * kMiB).begun.empty());
  pool.Housekeep();
  pool.CompleteAll();
  pool.Submit({{"a", 8 * kMiB}, {"b", 8 * kMiB}});
  pool.Housekeep();
  pool.CompleteAll();
  ASSERT_EQ(pool.scheduler.links_of("a"), 2u);
  ASSERT_EQ(pool.scheduler.links_of("b"), 2u);
  const uint64_t handovers = pool.scheduler.handovers();
  // c waits for a turn to end, then gets one link; asking for more, it takes nothing.
  EXPECT_TRUE(pool.Submit("c", 8 * kMiB).begun.empty());
  pool.now += o.turn;
  pool.Housekeep();
  pool.CompleteAll();
  ASSERT_EQ(pool.scheduler.links_of("c"), 1u);
  EXPECT_EQ(pool.scheduler.handovers(), handovers + 1);
  for (int round = 0; round < 10; ++round) {
    pool.Submit({{"a", 8 * kMiB}, {"b", 8 * kMiB}, {"c", 8 * kMiB}});
    pool.Housekeep();
    pool.CompleteAll();
  }
  EXPECT_EQ(pool.scheduler.handovers(), handovers + 1);
  EXPECT_EQ(pool.scheduler.links_of("a") + pool.scheduler.links_of("b"), 3u);
  EXPECT_EQ(pool.scheduler.links_of("c"), 1u);
  EXPECT_EQ(pool.scheduler.link_errors(), 0u);
}

// Two destinations hold half the pool each; one stops. The other, still busy, takes the idle
// one's links above its share once they have been idle for a turn (not before: they may be
// between two ops), without waiting for them to close. When the first is busy again it gets
// links back until both hold as many.
TEST(TcpLinkGrowthTest, ABusyDestinationTakesIdleLinksAboveAnothersShare) {
  TcpInitiatorOptions o = Options(kMiB, 2, 16);
  o.turn = absl::Milliseconds(200);
  PoolDriver pool(o);
  pool.Submit("a", 8 * kMiB);
  pool.Submit("b", 8 * kMiB);
  pool.CompleteAll();
  ASSERT_EQ(pool.scheduler.links_of("a"), 8u);
  ASSERT_EQ(pool.scheduler.links_of("b"), 8u);
  auto busy_round = [&](std::vector<std::pair<std::string, uint64_t>> ops) {
    pool.Submit(ops);
    pool.Housekeep();
    pool.CompleteAll();
  };
  for (int round = 0; round < 4; ++round) busy_round({{"b", 16 * kMiB}});
  EXPECT_EQ(pool.scheduler.links_of("a"), 8u) << "idle for less than a turn";
  pool.now += o.turn;
  for (int round = 0; round < 10; ++round) busy_round({{"b", 16 * kMiB}});
  EXPECT_EQ(pool.scheduler.links_of("a"), 2u) << "its share stays";
  EXPECT_EQ(pool.scheduler.links_of("b"), 14u);
  for (int round = 0; round < 10; ++round) busy_round({{"a", 16 * kMiB}, {"b", 16 * kMiB}});
  EXPECT_EQ(pool.scheduler.links_of("a"), 8u);
  EXPECT_EQ(pool.scheduler.links_of("b"), 8u);
  EXPECT_EQ(pool.scheduler.link_errors(), 0u);
}

// Idle links above the share close after extra_idle_timeout, the newest first; the share stays
// for idle_timeout. Closes the pool chose are not errors.
TEST(TcpLinkGrowthTest, IdleLinksAboveTheShareCloseSooner) {
  TcpInitiatorOptions o = Options(kMiB, 2, 64);
  o.extra_idle_timeout = absl::Seconds(2);
  o.idle_timeout = absl::Seconds(60);
  PoolDriver pool(o);
  pool.Submit("a", 32 * kMiB);
  ASSERT_EQ(pool.scheduler.links(), 16u);
  pool.CompleteAll();
  pool.now += o.extra_idle_timeout;
  pool.Housekeep();
  EXPECT_EQ(pool.scheduler.links(), 16u) << "exactly the timeout is not past it";
  pool.now += absl::Milliseconds(1);
  pool.Housekeep();
  EXPECT_EQ(pool.scheduler.links(), 2u);
  EXPECT_FALSE(pool.opened[0]->dead());
  EXPECT_FALSE(pool.opened[1]->dead());
  EXPECT_EQ(pool.closed, 14u);
  pool.now += o.idle_timeout;
  pool.Housekeep();
  EXPECT_EQ(pool.scheduler.links(), 0u);
  EXPECT_EQ(pool.scheduler.link_errors(), 0u);
}

}  // namespace
}  // namespace gdr::tcp_link_scheduler_test
