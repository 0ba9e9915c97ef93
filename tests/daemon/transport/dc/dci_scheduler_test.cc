#include "daemon/transport/dc/dci_scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

namespace gdr::dc {
namespace {

DestKey Dest(uint32_t dct, uint8_t last_gid_byte = 1) {
  DestKey k;
  k.dct_number = dct;
  k.addr.gid[15] = last_gid_byte;
  return k;
}

uint32_t Sum(const std::vector<Assignment>& a) {
  uint32_t n = 0;
  for (const auto& x : a) n += x.count;
  return n;
}

TEST(DciSchedulerTest, DestinationKeepsItsDciWhileItHasWorkInFlight) {
  DciScheduler s(4, 8, 0, 1);
  auto a = s.Reserve(Dest(1), 1);
  ASSERT_TRUE(a.ok());
  const uint32_t home = a->front().dci;
  // Load other DCIs more lightly than home would suggest: home still wins for dest 1.
  for (int i = 0; i < 3; ++i) {
    auto again = s.Reserve(Dest(1), 1);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->front().dci, home);
  }
  EXPECT_EQ(s.outstanding(home), 4u);
  EXPECT_EQ(s.home_of(Dest(1)), static_cast<int>(home));
  for (int i = 0; i < 4; ++i) s.Release(Dest(1), home, 0);
  EXPECT_EQ(s.home_of(Dest(1)), -1) << "a drained destination has no home any more";
  EXPECT_EQ(s.destinations(), 0u);
}

TEST(DciSchedulerTest, NewDestinationsGoToTheLeastLoadedDci) {
  DciScheduler s(3, 16, 0, 1);
  auto a = s.Reserve(Dest(1), 5);
  auto b = s.Reserve(Dest(2), 2);
  auto c = s.Reserve(Dest(3), 1);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_NE(a->front().dci, b->front().dci);
  EXPECT_NE(b->front().dci, c->front().dci);
  EXPECT_NE(a->front().dci, c->front().dci);
  // Loads are now 5, 2, 1: the next destination lands on dest 3's DCI.
  auto d = s.Reserve(Dest(4), 1);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->front().dci, c->front().dci);
}

TEST(DciSchedulerTest, ChunksOfOneOpSpreadOverDcisHomeFirst) {
  DciScheduler s(8, 64, 0, 4);
  auto a = s.Reserve(Dest(7), 10);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 4u);
  EXPECT_EQ(Sum(*a), 10u);
  EXPECT_EQ(static_cast<int>(a->front().dci), s.home_of(Dest(7)));
  std::set<uint32_t> dcis;
  for (const auto& x : *a) {
    dcis.insert(x.dci);
    EXPECT_GE(x.count, 2u);
    EXPECT_LE(x.count, 3u);
  }
  EXPECT_EQ(dcis.size(), 4u);
  EXPECT_EQ(s.total_outstanding(), 10u);
}

TEST(DciSchedulerTest, OneChunkOpsStayOnOneDci) {
  DciScheduler s(8, 64, 0, 4);
  auto a = s.Reserve(Dest(7), 1);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size(), 1u);
}

TEST(DciSchedulerTest, FullPoolIsResourceExhaustedAndReservesNothing) {
  DciScheduler s(2, 4, 0, 2);
  ASSERT_TRUE(s.Reserve(Dest(1), 7).ok());
  auto r = s.Reserve(Dest(2), 2);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_EQ(s.total_outstanding(), 7u);
  EXPECT_EQ(s.home_of(Dest(2)), -1);
  auto one = s.Reserve(Dest(2), 1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(s.total_outstanding(), 8u);
}

TEST(DciSchedulerTest, AnOpLargerThanItsSpreadUsesMoreDcisRatherThanFailing) {
  DciScheduler s(4, 4, 0, 2);
  auto a = s.Reserve(Dest(1), 14);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Sum(*a), 14u);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_LE(s.outstanding(i), 4u);
}

TEST(DciSchedulerTest, WorkSpillsElsewhereWhenTheHomeIsFullButTheHomeStays) {
  DciScheduler s(2, 2, 0, 1);
  auto a = s.Reserve(Dest(1), 2);
  ASSERT_TRUE(a.ok());
  const uint32_t home = a->front().dci;
  auto b = s.Reserve(Dest(1), 1);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(b->front().dci, home);
  EXPECT_EQ(s.home_of(Dest(1)), static_cast<int>(home));
}

TEST(DciSchedulerTest, DciInErrorTakesNoWorkAndItsDestinationsMove) {
  DciScheduler s(2, 8, 0, 1);
  auto a = s.Reserve(Dest(1), 1);
  ASSERT_TRUE(a.ok());
  const uint32_t bad = a->front().dci;
  s.MarkDciError(bad);
  EXPECT_EQ(s.ready_dcis(), 1u);
  auto b = s.Reserve(Dest(1), 3);
  ASSERT_TRUE(b.ok());
  for (const auto& x : *b) EXPECT_NE(x.dci, bad);
  EXPECT_NE(s.home_of(Dest(1)), static_cast<int>(bad));
  // The flushed WR of the bad DCI releases; then the DCI comes back.
  s.Release(Dest(1), bad, 0);
  EXPECT_EQ(s.outstanding(bad), 0u);
  s.MarkDciReady(bad);
  EXPECT_EQ(s.ready_dcis(), 2u);
  auto c = s.Reserve(Dest(2), 1);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->front().dci, bad) << "the recovered, idle DCI is the least loaded";
}

TEST(DciSchedulerTest, NoReadyDciIsUnavailable) {
  DciScheduler s(2, 8, 0, 1);
  s.MarkDciError(0);
  s.MarkDciFailed(1);
  auto r = s.Reserve(Dest(1), 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

TEST(DciSchedulerTest, StreamsSeparateDestinationsOnOneDci) {
  DciScheduler s(1, 64, 2, 1);  // 4 streams
  std::set<uint16_t> streams;
  for (uint32_t d = 1; d <= 4; ++d) {
    auto a = s.Reserve(Dest(d), 1);
    ASSERT_TRUE(a.ok());
    streams.insert(a->front().stream);
  }
  EXPECT_EQ(streams.size(), 4u) << "four destinations, four streams";
  // A destination keeps its stream while in flight.
  auto again = s.Reserve(Dest(2), 1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(s.stream_outstanding(0, again->front().stream), 2u);
}

TEST(DciSchedulerTest, StreamInErrorIsAvoidedUntilReset) {
  DciScheduler s(1, 64, 1, 1);  // 2 streams
  auto a = s.Reserve(Dest(1), 1);
  ASSERT_TRUE(a.ok());
  const uint16_t bad = a->front().stream;
  s.MarkStreamError(0, bad);
  for (uint32_t d = 2; d < 6; ++d) {
    auto b = s.Reserve(Dest(d), 1);
    ASSERT_TRUE(b.ok());
    EXPECT_NE(b->front().stream, bad);
  }
  // Destination 1 moves off its errored stream too.
  auto c = s.Reserve(Dest(1), 1);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->front().stream, bad);
  s.MarkStreamError(0, 1 - bad);
  EXPECT_FALSE(s.Reserve(Dest(9), 1).ok()) << "every stream of the only DCI is in error";
  s.MarkStreamReady(0, bad);
  EXPECT_TRUE(s.Reserve(Dest(9), 1).ok());
}

}  // namespace
}  // namespace gdr::dc
