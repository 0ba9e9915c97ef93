// Unit tests of the tcp link pool's decisions (daemon/transport/tcp/tcp_link_scheduler.h) over
// fake links and a test clock: no sockets, no threads. Each test drives the scheduler the way
// TcpInitiator does (place, schedule when a destination started waiting, enqueue, housekeeping
// rounds, drains) and plays the links' part by hand (chunks outstanding, completions).
#include "daemon/transport/tcp/tcp_link_scheduler.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::ElementsAre;
using ::testing::Each;

// A link as the scheduler sees it, whose state the test sets. Behaves as TcpLink where the
// scheduler can tell: Fail is idempotent and completes what is outstanding; Retire either
// reports "nothing outstanding" or leaves the drain to the completion of the last chunk.
class FakeLink {
 public:
  // `clock`: the test's time, read when the link is retired.
  FakeLink(std::string dest, const absl::Time* clock)
      : dest(std::move(dest)), opened(*clock), last(*clock), clock_(clock) {}

  bool dead() const { return dead_; }
  absl::Status error() const { return error_; }
  uint64_t outstanding_bytes() const { return bytes; }
  uint64_t outstanding_chunks() const { return chunks; }
  absl::Time opened_at() const { return opened; }
  absl::Time last_activity() const { return last; }
  absl::Time retired_at() const { return retired; }
  bool Retire(std::function<void()> on_drained) {
    on_drained_ = std::move(on_drained);
    retired = *clock_;
    is_retired = true;
    return chunks == 0 && !std::exchange(drain_claimed_, true);
  }
  void Fail(const absl::Status& status) {
    if (dead_) return;
    dead_ = true;
    error_ = status;
    ++fails;
    if (chunks != 0) Complete();
  }
  // Every outstanding chunk answered (or failed); a retired link then reports its drain.
  void Complete() {
    bytes = chunks = 0;
    if (is_retired && !std::exchange(drain_claimed_, true)) on_drained_();
  }

  const std::string dest;
  const absl::Time opened;
  absl::Time last;
  absl::Time retired;
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  bool is_retired = false;
  int fails = 0;

 private:
  const absl::Time* const clock_;
  bool dead_ = false;
  absl::Status error_;
  bool drain_claimed_ = false;
  std::function<void()> on_drained_;
};

using Scheduler = TcpLinkScheduler<FakeLink>;

// One op's chunk as the scheduler placed it.
struct Placed {
  std::string dest;  // of the op
  FakeLink* link;
  uint64_t offset;
  uint32_t length;
};

class RecordingPlan final : public Scheduler::Plan {
 public:
  void BeginOp(const TransferOp& op, OpDone& done, uint32_t chunks) override {
    begun.push_back({op.volume, chunks});
    done = nullptr;  // taken
  }
  void AddChunk(const TransferOp& op, size_t link, uint64_t offset, uint32_t length) override {
    placed.push_back({op.volume, links()[link].get(), offset, length});
  }
  std::vector<std::pair<std::string, uint32_t>> begun;  // destination, chunks
  std::vector<Placed> placed;
};

// An op to `dest`: the fake names its links after op.volume, which the scheduler never reads.
TransferOp Op(const std::string& dest, uint64_t length) {
  TransferOp op;
  op.volume = dest;
  op.length = length;
  return op;
}

// The scheduler with the initiator's calling pattern around it.
class Pool {
 public:
  explicit Pool(TcpInitiatorOptions o)
      : options(o),
        scheduler(
            o,
            [this](const TransferOp& op) {
              auto link = std::make_shared<FakeLink>(op.volume, &now);
              opened.push_back(link);
              return link;
            },
            [this](FakeLink* link) { drained.push_back(link); }) {}

  // Submit / SubmitBatch: place, schedule if a destination started waiting, enqueue.
  RecordingPlan Submit(const std::vector<std::pair<std::string, uint64_t>>& ops) {
    RecordingPlan plan;
    const size_t waiting_before = scheduler.waiting_destinations();
    for (const auto& [dest, length] : ops) {
      OpDone done = [](absl::Status) {};
      scheduler.Place(dest, Op(dest, length), done, now, plan);
      EXPECT_TRUE(done == nullptr) << "Place always takes the op";
    }
    if (scheduler.waiting_destinations() > waiting_before) scheduler.Schedule(now, plan);
    Enqueue(plan);
    return plan;
  }
  RecordingPlan Submit(const std::string& dest, uint64_t length) {
    return Submit({{dest, length}});
  }
  // A housekeeping round: overdue retirees fail, idle links close, dead ones are reaped,
  // expired waiters fail, turns end.
  RecordingPlan Housekeep() {
    for (auto& l : scheduler.Overdue(now)) l->Fail(absl::UnavailableError("overdue"));
    RunDrains();
    RecordingPlan plan;
    scheduler.CloseIdle(now);
    scheduler.ReapDead();
    for (TcpWaiter& w : scheduler.TakeExpired(now)) expired.push_back(w.op.volume);
    if (scheduler.waiting_destinations() != 0) scheduler.Schedule(now, plan);
    Enqueue(plan);
    closed += scheduler.TakeClosed().size();
    return plan;
  }
  // Completes every outstanding chunk of `link` at the current time, and any drain that causes.
  RecordingPlan Complete(FakeLink* link) {
    link->last = now;
    link->Complete();
    return RunDrains();
  }
  // Completes every link's chunks, those of links that completions open included; returns the
  // destinations of the ops that were placed on the way.
  std::vector<std::string> CompleteAll() {
    std::vector<std::string> begun;
    for (size_t i = 0; i < opened.size(); ++i) {
      if (opened[i]->chunks == 0) continue;
      for (const auto& b : Complete(opened[i].get()).begun) begun.push_back(b.first);
    }
    return begun;
  }
  std::vector<std::shared_ptr<FakeLink>> LinksTo(const std::string& dest) const {
    std::vector<std::shared_ptr<FakeLink>> out;
    for (auto& l : opened)
      if (l->dest == dest) out.push_back(l);
    return out;
  }

  TcpInitiatorOptions options;
  absl::Time now = absl::UnixEpoch() + absl::Hours(1);
  std::vector<std::shared_ptr<FakeLink>> opened;  // every link the scheduler opened
  std::vector<FakeLink*> drained;
  std::vector<std::string> expired;
  size_t closed = 0;
  Scheduler scheduler;

 private:
  void Enqueue(const RecordingPlan& plan) {
    for (const Placed& p : plan.placed) {
      if (p.link->dead()) continue;  // TcpLink::Enqueue fails them at once
      p.link->bytes += p.length;
      ++p.link->chunks;
      p.link->last = now;
    }
  }
  RecordingPlan RunDrains() {
    RecordingPlan plan;
    while (!drained.empty()) {
      FakeLink* l = drained.front();
      drained.erase(drained.begin());
      scheduler.Drained(l, now, plan);
    }
    Enqueue(plan);
    return plan;
  }
};

std::vector<FakeLink*> LinksOf(const RecordingPlan& plan) {
  std::vector<FakeLink*> out;
  for (const Placed& p : plan.placed)
    if (std::find(out.begin(), out.end(), p.link) == out.end()) out.push_back(p.link);
  return out;
}

TcpInitiatorOptions Options(uint64_t chunk_bytes = 1 << 20, uint32_t links_per_target = 2,
                            uint32_t max_links = 64) {
  TcpInitiatorOptions o;
  o.chunk_bytes = chunk_bytes;
  o.links_per_target = links_per_target;
  o.max_links = max_links;
  return o;
}

// The chunk planner: an op is cut into chunk_bytes pieces, in order, covering it exactly (the
// shapes TcpInitiatorTest.MovesBytesBothDirectionsAtEveryChunkSizeAndAlignment moves for real).
TEST(TcpLinkSchedulerTest, ChunksCoverTheOpInOrderAtEveryChunkSize) {
  for (uint64_t chunk : {4096ull, 5000ull, 65536ull, 1ull << 20}) {
    for (uint64_t length : {1ull, 4095ull, 4096ull, 3 * 4096 + 1ull, 65537ull, 2500001ull}) {
      SCOPED_TRACE(testing::Message() << "chunk " << chunk << " length " << length);
      Pool pool(Options(chunk));
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
  Pool pool(Options(1 << 20, 2));
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
  Pool pool(Options(1 << 20, 2));
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
  Pool pool(Options(4096, 2));
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

// However many chunks are in flight, a destination holds links_per_target links at most; the
// chunks beyond go to the least loaded of them.
TEST(TcpLinkSchedulerTest, LinksPerDestinationAreCappedAndLoadIsSpread) {
  Pool pool(Options(8192, 3));
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
  Pool pool(Options(1 << 20, 2, 1));
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
  Pool pool(Options(1 << 20, 2, 1));
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
  Pool pool(o);
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
  Pool pool(o);
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
  Pool pool(o);
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
  Pool pool(Options(4096, 2, 2));
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

// More destinations than links, each keeping ops in flight: every op is placed exactly once,
// in turns, the pool never holds more than its links, and links were handed over, not refused.
TEST(TcpLinkSchedulerTest, MoreDestinationsThanLinksAreServedInTurns) {
  TcpInitiatorOptions o = Options(64 << 10, 2, 2);
  o.turn = absl::Milliseconds(5);
  Pool pool(o);
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
  Pool pool(o);
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
  Pool pool(o);
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
  Pool pool(Options(1 << 20, 2));
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
  Pool pool(Options(1 << 20, 2, 1));
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
}  // namespace gdr
