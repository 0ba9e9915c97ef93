// Unit tests of the tcp link pool's decisions (daemon/transport/tcp/tcp_link_scheduler.h) over
// fake links and a test clock: no sockets, no threads. Each test drives the scheduler the way
// TcpInitiator does and plays the links' part by hand (chunks outstanding, completions).
#include "daemon/transport/tcp/tcp_link_scheduler.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/transport/tcp/fake_tcp_pool.h"

namespace gdr::tcp_link_scheduler_test {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;

// Options whose destinations hold no more than their share (max_links_per_target =
// links_per_target): the pool before a lone destination could grow past it, for the tests that
// pin that cap.
TcpInitiatorOptions ShareOnly(uint64_t chunk_bytes, uint32_t links_per_target,
                              uint32_t max_links = 64) {
  TcpInitiatorOptions o = Options(chunk_bytes, links_per_target, max_links);
  o.max_links_per_target = links_per_target;
  return o;
}

// The chunk planner: an op is cut into chunk_bytes pieces, in order, covering it exactly (the
// shapes TcpInitiatorTest.MovesBytesBothDirectionsAtEveryChunkSizeAndAlignment moves for real).
TEST(TcpLinkSchedulerTest, ChunksCoverTheOpInOrderAtEveryChunkSize) {
  for (uint64_t chunk : {4096ull, 5000ull, 65536ull, 1ull << 20}) {
    for (uint64_t length : {1ull, 4095ull, 4096ull, 3 * 4096 + 1ull, 65537ull, 2500001ull}) {
      SCOPED_TRACE(testing::Message() << "chunk " << chunk << " length " << length);
      PoolDriver pool(Options(chunk));
      RecordingPlan plan = pool.Submit("a", length);
      ASSERT_EQ(plan.begun.size(), 1u);
      const uint64_t n = (length + chunk - 1) / chunk;
      EXPECT_EQ(plan.begun[0].second, n);
      ASSERT_EQ(plan.placed.size(), n);
      uint64_t next = 0;
      for (const Placed& p : plan.placed) {
        EXPECT_EQ(p.offset, next);
        EXPECT_EQ(p.length, std::min(chunk, length - next));
        next += p.length;
      }
      EXPECT_EQ(next, length);
    }
  }
}

// Small ops share one link; a destination gets its second link only once the first carries a
// full chunk, so bulk transfers stripe and small ones do not pay extra thread wake-ups.
TEST(TcpLinkSchedulerTest, SecondLinkOnlyForBulk) {
  PoolDriver pool(ShareOnly(1 << 20, 2));
  std::vector<std::pair<std::string, uint64_t>> batch(32, {"a", 4096});
  RecordingPlan small = pool.Submit(batch);
  EXPECT_EQ(small.begun.size(), 32u);
  EXPECT_EQ(LinksOf(small).size(), 1u);
  EXPECT_EQ(pool.scheduler.links(), 1u);
  pool.CompleteAll();
  RecordingPlan bulk = pool.Submit("a", 8 << 20);
  EXPECT_EQ(pool.scheduler.links(), 2u);
  EXPECT_EQ(LinksOf(bulk).size(), 2u);
  // Striped: each link carries half of the chunks.
  EXPECT_EQ(pool.opened[0]->bytes, 4u << 20);
  EXPECT_EQ(pool.opened[1]->bytes, 4u << 20);
}

// Once bulk transfers opened a destination's second link, small ops still keep to one link
// (one thread pair, one burst of answers), so a small-op rate does not depend on what ran
// before it.
TEST(TcpLinkSchedulerTest, SmallOpsKeepToOneLinkAfterBulkOpenedTwo) {
  PoolDriver pool(ShareOnly(1 << 20, 2));
  RecordingPlan bulk = pool.Submit("a", 8 << 20);
  ASSERT_EQ(pool.scheduler.links(), 2u);
  ASSERT_EQ(LinksOf(bulk).size(), 2u);
  EXPECT_GT(pool.opened[0]->bytes, 0u);
  EXPECT_GT(pool.opened[1]->bytes, 0u);
  pool.CompleteAll();
  std::map<FakeLink*, int> per_link;
  for (int round = 0; round < 20; ++round) {
    std::vector<std::pair<std::string, uint64_t>> batch(32, {"a", 4096});
    const RecordingPlan plan = pool.Submit(batch);
    for (const Placed& p : plan.placed) ++per_link[p.link];
    pool.CompleteAll();
  }
  ASSERT_EQ(per_link.size(), 1u) << "small ops spread over " << per_link.size() << " links";
  EXPECT_EQ(per_link.begin()->second, 20 * 32);
  EXPECT_EQ(pool.scheduler.links(), 2u);
}

// Links are reused per destination: alternating ops to two destinations open no more links to
// each than links_per_target (the connections each target would see).
TEST(TcpLinkSchedulerTest, LinksAreReusedPerDestination) {
  PoolDriver pool(ShareOnly(4096, 2));
  for (int i = 0; i < 200; ++i) {
    pool.Submit(i % 2 ? "a" : "b", 3 * 4096);
    ASSERT_LE(pool.scheduler.links(), 2 * pool.options.links_per_target) << "op " << i;
    ASSERT_LE(pool.scheduler.destinations(), 2u);
    pool.CompleteAll();
  }
  EXPECT_EQ(pool.scheduler.destinations(), 2u);
  EXPECT_LE(pool.LinksTo("a").size(), pool.options.links_per_target);
  EXPECT_LE(pool.LinksTo("b").size(), pool.options.links_per_target);
  EXPECT_EQ(pool.scheduler.link_errors(), 0u);
}

// However many chunks are in flight, a destination holds max_links_per_target links at most
// (here its share); the chunks beyond go to the least loaded of them.
TEST(TcpLinkSchedulerTest, LinksPerDestinationAreCappedAndLoadIsSpread) {
  PoolDriver pool(ShareOnly(8192, 3));
  for (int i = 0; i < 400; ++i) pool.Submit("a", 1 + (i * 7919) % (32768 - 16));
  EXPECT_EQ(pool.scheduler.links(), 3u);
  EXPECT_EQ(pool.scheduler.destinations(), 1u);
  EXPECT_EQ(pool.scheduler.links_of("a"), 3u);
  uint64_t most = 0, least = ~uint64_t{0};
  for (auto& l : pool.opened) {
    most = std::max(most, l->bytes);
    least = std::min(least, l->bytes);
  }
  EXPECT_LE(most - least, 8192u) << "the least loaded link takes the next chunk";
}

// A full pool schedules, it does not refuse: the second destination waits, and so do its later
// ops and every destination after it (first come, first served), even one that has a link
// nobody else uses... until its turn comes.
TEST(TcpLinkSchedulerTest, AFullPoolQueuesDestinationsInOrder) {
  PoolDriver pool(Options(1 << 20, 2, 1));
  pool.Submit("a", 4096);
  EXPECT_TRUE(pool.Submit("b", 4096).begun.empty());
  EXPECT_TRUE(pool.Submit("c", 4096).begun.empty());
  EXPECT_TRUE(pool.Submit("b", 4096).begun.empty());
  EXPECT_EQ(pool.scheduler.waiting_ops(), 3u);
  EXPECT_EQ(pool.scheduler.waiting_destinations(), 2u);
  // "a" still has its link: its ops keep going on it.
  EXPECT_EQ(pool.Submit("a", 4096).begun.size(), 1u);
  EXPECT_EQ(pool.scheduler.links(), 1u);
  // Past a's turn, with a's chunks answered, the next round hands the link to b (both ops).
  pool.CompleteAll();
  pool.now += pool.options.turn;
  RecordingPlan handed = pool.Housekeep();
  ASSERT_EQ(handed.begun.size(), 2u);
  EXPECT_EQ(handed.begun[0].first, "b");
  EXPECT_EQ(handed.begun[1].first, "b");
  EXPECT_EQ(pool.scheduler.waiting_ops(), 1u);
  EXPECT_EQ(pool.scheduler.handovers(), 1u);
  EXPECT_EQ(pool.scheduler.links(), 1u);
  // "a" now waits behind "c".
  EXPECT_TRUE(pool.Submit("a", 4096).begun.empty());
  pool.CompleteAll();
  pool.now += pool.options.turn;
  ASSERT_EQ(pool.Housekeep().begun.size(), 1u);
  EXPECT_EQ(pool.LinksTo("c").size(), 1u);
  pool.CompleteAll();
  pool.now += pool.options.turn;
  ASSERT_EQ(pool.Housekeep().begun.size(), 1u);
  EXPECT_EQ(pool.scheduler.waiting_ops(), 0u);
  EXPECT_EQ(pool.scheduler.link_errors(), 0u);
}

// An idle link whose turn is over is taken at once for another destination; one inside its turn
// is not (its destination would only take another's: thrashing), so the op waits until a
// housekeeping round retires it. Either way the pool holds one link, and evictions are the
// pool's choice, not failures.
TEST(TcpLinkSchedulerTest, IdleLinkIsEvictedForAnotherDestination) {
  PoolDriver pool(Options(1 << 20, 2, 1));
  for (int i = 0; i < 6; ++i) {
    const std::string dest = i % 2 ? "b" : "a";
    if (i % 4 < 2) {
      // Past the turn of the link in the pool: evicted on the spot.
      pool.now += pool.options.turn;
      ASSERT_EQ(pool.Submit(dest, 100000).begun.size(), 1u) << "op " << i;
    } else {
      // Inside it: the op waits for the round after the turn.
      ASSERT_TRUE(pool.Submit(dest, 100000).begun.empty()) << "op " << i;
      EXPECT_EQ(pool.scheduler.waiting_ops(), 1u);
      pool.CompleteAll();
      pool.now += pool.options.turn / 2;
      EXPECT_TRUE(pool.Housekeep().begun.empty()) << "op " << i;
      pool.now += pool.options.turn / 2;
      ASSERT_EQ(pool.Housekeep().begun.size(), 1u) << "op " << i;
    }
    EXPECT_EQ(pool.scheduler.links(), 1u);
    EXPECT_EQ(pool.LinksTo(dest).back()->chunks, 1u);
    pool.CompleteAll();
  }
  EXPECT_EQ(pool.scheduler.handovers(), 5u);
  EXPECT_EQ(pool.scheduler.link_errors(), 0u);
  EXPECT_EQ(pool.opened.size(), 6u);
}

// Planning a batch never closes a link that an earlier op of the same batch was planned on:
// with room for one link, idle and past its turn, the second destination of the batch waits
// until the first's chunks are answered, then gets the link; both ops run once.
TEST(TcpLinkSchedulerTest, SubmitBatchNeverEvictsALinkItPlannedOn) {
  TcpInitiatorOptions o = Options(1 << 20, 2, 1);
  o.turn = absl::Milliseconds(10);
  PoolDriver pool(o);
  pool.Submit("a", 4096);
  pool.CompleteAll();
  pool.now += absl::Seconds(1);
  RecordingPlan batch = pool.Submit({{"a", 4096}, {"b", 4096}});
  ASSERT_EQ(batch.begun.size(), 1u);
  EXPECT_EQ(batch.begun[0].first, "a");
  EXPECT_FALSE(pool.opened[0]->dead());
  EXPECT_FALSE(pool.opened[0]->is_retired);
  EXPECT_EQ(pool.opened[0]->chunks, 1u);
  EXPECT_EQ(pool.scheduler.waiting_ops(), 1u);
  // The next round retires a's link; once its chunk is answered b has it.
  EXPECT_TRUE(pool.Housekeep().begun.empty());
  EXPECT_TRUE(pool.opened[0]->is_retired);
  RecordingPlan handed = pool.Complete(pool.opened[0].get());
  ASSERT_EQ(handed.begun.size(), 1u);
  EXPECT_EQ(handed.begun[0].first, "b");
  EXPECT_EQ(pool.scheduler.waiting_ops(), 0u);
  EXPECT_EQ(pool.scheduler.links(), 1u);
  EXPECT_EQ(pool.scheduler.link_errors(), 0u);
}

// A link past its turn retires while a destination waits: it takes no new work, and when its
// last chunk is answered it closes and the waiting destination gets a link. One that does not
// drain within the handover timeout is overdue (the initiator fails its ops; then it drains).
TEST(TcpLinkSchedulerTest, ARetiredLinkIsHandedOverWhenItDrainsOrOverdueAfterTheTimeout) {
  TcpInitiatorOptions o = Options(1 << 20, 2, 1);
  o.turn = absl::Milliseconds(10);
  o.handover_timeout = absl::Milliseconds(300);
  PoolDriver pool(o);
  pool.Submit("stuck", 4096);
  pool.now += absl::Milliseconds(20);
  EXPECT_TRUE(pool.Submit("waiting", 4096).begun.empty());
  // The submit itself scheduled: the stuck link's turn is over, so it retired.
  FakeLink* stuck = pool.opened[0].get();
  EXPECT_TRUE(stuck->is_retired);
  EXPECT_EQ(pool.scheduler.retiring(), 1u);
  EXPECT_EQ(pool.scheduler.links(), 1u);
  EXPECT_TRUE(pool.scheduler.Overdue(pool.now).empty());
  pool.now += absl::Milliseconds(300);
  EXPECT_TRUE(pool.scheduler.Overdue(pool.now).empty()) << "not yet past the timeout";
  pool.now += absl::Milliseconds(1);
  ASSERT_EQ(pool.scheduler.Overdue(pool.now).size(), 1u);
  pool.Housekeep();  // fails the stuck link: it drains
  EXPECT_EQ(stuck->fails, 1);
  EXPECT_EQ(pool.scheduler.waiting_ops(), 0u);
  EXPECT_EQ(pool.LinksTo("waiting").size(), 1u);
  EXPECT_EQ(pool.LinksTo("waiting")[0]->chunks, 1u);
  EXPECT_EQ(pool.scheduler.links(), 1u);
  EXPECT_GE(pool.scheduler.handovers(), 1u);
  EXPECT_EQ(pool.scheduler.retiring(), 0u);
}

// Links retire a few at a time: no more than destinations wait, at most max(1, max_links / 8),
// a destination's extra links first, then the longest-serving.
TEST(TcpLinkSchedulerTest, RetirementTakesExtraLinksFirstThenTheLongestServing) {
  TcpInitiatorOptions o = Options(4096, 2, 16);
  o.turn = absl::Milliseconds(10);
  PoolDriver pool(o);
  // Twelve single-link destinations opened 1 ms apart, then "bulk" with two links: 14 links.
  for (int i = 0; i < 12; ++i) {
    pool.Submit("d" + std::to_string(10 + i), 4096);
    pool.now += absl::Milliseconds(1);
  }
  pool.Submit("bulk", 2 * 4096);
  ASSERT_EQ(pool.LinksTo("bulk").size(), 2u);
  pool.Submit("e1", 4096);
  pool.Submit("e2", 4096);
  ASSERT_EQ(pool.scheduler.links(), 16u);
  pool.now += absl::Milliseconds(20);
  // One destination waits: one link retires, bulk's extra one (an extra link goes before any
  // older single link).
  EXPECT_TRUE(pool.Submit("w1", 4096).begun.empty());
  EXPECT_EQ(pool.scheduler.retiring(), 1u);
  const auto bulk = pool.LinksTo("bulk");
  EXPECT_TRUE(bulk[0]->is_retired || bulk[1]->is_retired);
  // Three wait: retiring grows to max_links / 8 = 2, the longest-serving single link next.
  EXPECT_TRUE(pool.Submit("w2", 4096).begun.empty());
  EXPECT_TRUE(pool.Submit("w3", 4096).begun.empty());
  EXPECT_EQ(pool.scheduler.retiring(), 2u);
  EXPECT_TRUE(pool.LinksTo("d10")[0]->is_retired);
  EXPECT_FALSE(pool.LinksTo("d11")[0]->is_retired);
  // As each retired link drains it closes and the next waiting destination gets its place,
  // and the next longest-serving link retires while others still wait.
  EXPECT_THAT(pool.CompleteAll(), ElementsAre("w1", "w2", "w3"));
  EXPECT_TRUE(pool.LinksTo("d11")[0]->is_retired);
  EXPECT_FALSE(pool.LinksTo("d12")[0]->is_retired);
  EXPECT_EQ(pool.scheduler.waiting_ops(), 0u);
  EXPECT_EQ(pool.scheduler.retiring(), 0u);
  EXPECT_EQ(pool.scheduler.handovers(), 3u);
  EXPECT_EQ(pool.scheduler.links(), 16u);
  EXPECT_EQ(pool.scheduler.link_errors(), 0u);
}

// While a destination waits, nobody opens an extra link, even when the pool has room (a lost
// link was reaped and the next round has not handed its place over yet): a bulk op to a
// destination that has a link stays on it.
TEST(TcpLinkSchedulerTest, NoExtraLinkWhileADestinationWaits) {
  PoolDriver pool(Options(4096, 2, 2));
  pool.Submit("a", 4096);
  pool.Submit("b", 4096);
  EXPECT_TRUE(pool.Submit("c", 4096).begun.empty());
  pool.LinksTo("b")[0]->Fail(absl::UnavailableError("lost"));
  pool.scheduler.ReapDead();
  ASSERT_EQ(pool.scheduler.links(), 1u);
  RecordingPlan bulk = pool.Submit("a", 4 * 4096);
  ASSERT_EQ(bulk.begun.size(), 1u);
  EXPECT_THAT(LinksOf(bulk), ElementsAre(pool.LinksTo("a")[0].get()));
  EXPECT_EQ(pool.LinksTo("a").size(), 1u);
  EXPECT_EQ(pool.scheduler.waiting_ops(), 1u);
}

// First come, first served: a new destination waits behind those already waiting even when the
// pool has room for a link (a lost one was reaped); the next schedule gives that room to the
// destination that waited longest.
TEST(TcpLinkSchedulerTest, ANewDestinationWaitsBehindTheWaitingOnesEvenWithRoom) {
  PoolDriver pool(Options(4096, 2, 2));
  pool.Submit("a", 4096);
  pool.Submit("b", 4096);
  EXPECT_TRUE(pool.Submit("c", 4096).begun.empty());
  pool.LinksTo("b")[0]->Fail(absl::UnavailableError("lost"));
  pool.scheduler.ReapDead();
  ASSERT_EQ(pool.scheduler.links(), 1u);
  RecordingPlan plan = pool.Submit("d", 4096);
  ASSERT_EQ(plan.begun.size(), 1u);
  EXPECT_EQ(plan.begun[0].first, "c");
  EXPECT_TRUE(pool.LinksTo("d").empty());
  EXPECT_EQ(pool.scheduler.waiting_ops(), 1u);
}

// More destinations than links, each keeping ops in flight: every op is placed exactly once,
// in turns, the pool never holds more than its links, and links were handed over, not refused.
TEST(TcpLinkSchedulerTest, MoreDestinationsThanLinksAreServedInTurns) {
  TcpInitiatorOptions o = Options(64 << 10, 2, 2);
  o.turn = absl::Milliseconds(5);
  PoolDriver pool(o);
  constexpr int kClients = 6, kOps = 60;
  std::map<std::string, int> placed;
  uint32_t most_links = 0;
  // A millisecond passes: every link answers and housekeeping comes round (it does every
  // turn / 4 while destinations wait).
  auto tick = [&] {
    pool.now += absl::Milliseconds(1);
    for (const std::string& d : pool.CompleteAll()) ++placed[d];
    const RecordingPlan round = pool.Housekeep();
    for (const auto& b : round.begun) ++placed[b.first];
    most_links = std::max(most_links, pool.scheduler.links());
  };
  for (int i = 0; i < kOps; ++i) {
    for (int c = 0; c < kClients; ++c) {
      const std::string dest = "client" + std::to_string(c);
      // Two ops in flight per client.
      const RecordingPlan plan = pool.Submit({{dest, 100 << 10}, {dest, 100 << 10}});
      for (const auto& b : plan.begun) ++placed[b.first];
      most_links = std::max(most_links, pool.scheduler.links());
    }
    tick();
  }
  for (int round = 0; round < 1000 && pool.scheduler.waiting_ops() != 0; ++round) tick();
  ASSERT_EQ(placed.size(), size_t{kClients});
  for (const auto& [d, n] : placed) EXPECT_EQ(n, 2 * kOps) << d;
  EXPECT_LE(most_links, o.max_links);
  EXPECT_GE(pool.scheduler.handovers(), 1u);
  EXPECT_EQ(pool.scheduler.waiting_ops(), 0u);
  EXPECT_EQ(pool.scheduler.link_errors(), 0u);
}

// Ops that wait longer than the op timeout expire, oldest first; the others keep waiting.
TEST(TcpLinkSchedulerTest, WaitingOpsExpireAfterTheOpTimeout) {
  TcpInitiatorOptions o = Options(1 << 20, 2, 1);
  o.op_timeout = absl::Seconds(30);
  o.turn = absl::Hours(1);
  PoolDriver pool(o);
  pool.Submit("a", 4096);
  pool.Submit("b", 4096);
  pool.now += absl::Seconds(20);
  pool.Submit("c", 4096);
  pool.Submit("b", 4096);
  EXPECT_EQ(pool.scheduler.waiting_ops(), 3u);
  pool.now += absl::Seconds(10);
  pool.Housekeep();
  EXPECT_TRUE(pool.expired.empty()) << "exactly the timeout is not past it";
  pool.now += absl::Milliseconds(1);
  pool.Housekeep();
  EXPECT_THAT(pool.expired, ElementsAre("b"));
  EXPECT_EQ(pool.scheduler.waiting_ops(), 2u);
  EXPECT_EQ(pool.scheduler.waiting_destinations(), 2u);
  pool.now += absl::Seconds(20);
  pool.Housekeep();
  EXPECT_THAT(pool.expired, ElementsAre("b", "b", "c"));
  EXPECT_EQ(pool.scheduler.waiting_ops(), 0u);
  EXPECT_EQ(pool.scheduler.waiting_destinations(), 0u);
}

// Idle links (nothing outstanding for the idle timeout) are closed, and leave the pool in the
// same round; a busy link stays whatever its age. Closes the pool chose are not errors.
TEST(TcpLinkSchedulerTest, IdleLinksCloseAndDeadOnesLeaveThePool) {
  TcpInitiatorOptions o = Options(1 << 20, 1);
  o.idle_timeout = absl::Seconds(60);
  PoolDriver pool(o);
  pool.Submit("idle", 4096);
  pool.Submit("busy", 4096);
  pool.Complete(pool.LinksTo("idle")[0].get());
  pool.now += absl::Seconds(61);
  pool.Housekeep();
  EXPECT_TRUE(pool.LinksTo("idle")[0]->dead());
  EXPECT_TRUE(absl::IsCancelled(pool.LinksTo("idle")[0]->error()));
  EXPECT_FALSE(pool.LinksTo("busy")[0]->dead());
  EXPECT_EQ(pool.scheduler.links(), 1u);
  EXPECT_EQ(pool.scheduler.destinations(), 1u);
  EXPECT_EQ(pool.closed, 1u);
  EXPECT_EQ(pool.scheduler.link_errors(), 0u);
  // A link that died of a failure leaves too, and counts as an error.
  pool.LinksTo("busy")[0]->Fail(absl::UnavailableError("connection refused"));
  pool.Housekeep();
  EXPECT_EQ(pool.scheduler.links(), 0u);
  EXPECT_EQ(pool.scheduler.link_errors(), 1u);
}

// A dead link is replaced when its destination's next op comes, not counted against the pool
// forever: a destination whose every link fails keeps at most links_per_target, and each lost
// link is an error.
TEST(TcpLinkSchedulerTest, DeadLinksAreReplacedOnTheNextOp) {
  PoolDriver pool(Options(1 << 20, 2));
  for (int i = 0; i < 20; ++i) {
    RecordingPlan plan = pool.Submit("refused", 100);
    ASSERT_EQ(plan.placed.size(), 1u);
    plan.placed[0].link->Fail(absl::UnavailableError("connection refused"));
    EXPECT_LE(pool.scheduler.links(), pool.options.links_per_target);
  }
  EXPECT_EQ(pool.opened.size(), 20u);
  EXPECT_THAT(pool.opened, Each(testing::Pointee(testing::Property(&FakeLink::dead, true))));
  pool.Housekeep();
  EXPECT_EQ(pool.scheduler.link_errors(), 20u);
  EXPECT_EQ(pool.scheduler.links(), 0u);
}

// Shutdown takes everything: each link once (pooled, retiring, closed) and each waiting op.
TEST(TcpLinkSchedulerTest, TakeAllEmptiesThePool) {
  PoolDriver pool(Options(1 << 20, 2, 1));
  pool.Submit("busy", 4096);
  EXPECT_TRUE(pool.Submit("waiting", 4096).begun.empty());
  EXPECT_EQ(pool.scheduler.waiting_ops(), 1u);
  std::vector<std::shared_ptr<FakeLink>> links;
  std::vector<TcpWaiter> waiters;
  pool.scheduler.TakeAll(links, waiters);
  EXPECT_EQ(links.size(), 1u);
  ASSERT_EQ(waiters.size(), 1u);
  EXPECT_EQ(waiters[0].op.volume, "waiting");
  EXPECT_NE(waiters[0].done, nullptr);
  EXPECT_EQ(pool.scheduler.links(), 0u);
  EXPECT_EQ(pool.scheduler.waiting_ops(), 0u);
  EXPECT_EQ(pool.scheduler.destinations(), 0u);
}

}  // namespace
}  // namespace gdr::tcp_link_scheduler_test
