// Which queued copy a free copy thread takes (daemon/transport/local/copy_lanes.h).
#include "daemon/transport/local/copy_lanes.h"

#include <deque>

#include "gtest/gtest.h"

namespace gdr {
namespace {

int Lane(int lane) { return lane; }

TEST(CopyLanesTest, TakesTheOldestPieceOfALaneNobodyCopiesOn) {
  CopyLanes lanes;
  lanes.Begin(0);
  lanes.Begin(0);
  const std::deque<int> queue{0, 0, 0, 1, 1, 2};
  EXPECT_EQ(lanes.Pick(queue, Lane), 3u);  // GPU 1's first, not GPU 0's third copy
  lanes.Begin(1);
  EXPECT_EQ(lanes.Pick(queue, Lane), 5u);  // then GPU 2's
}

TEST(CopyLanesTest, AmongBusyLanesTakesTheOneWithFewestCopies) {
  CopyLanes lanes;
  for (int i = 0; i < 3; ++i) lanes.Begin(0);
  lanes.Begin(1);
  lanes.Begin(-1);
  lanes.Begin(-1);
  const std::deque<int> queue{0, -1, 1, 1};
  EXPECT_EQ(lanes.Pick(queue, Lane), 2u);
  lanes.End(0);
  lanes.End(0);
  lanes.End(0);  // lane 0 idle again: its piece is the oldest of an idle lane
  EXPECT_EQ(lanes.running(0), 0u);
  EXPECT_EQ(lanes.Pick(queue, Lane), 0u);
}

TEST(CopyLanesTest, EqualLanesKeepQueueOrder) {
  CopyLanes lanes;
  EXPECT_EQ(lanes.Pick(std::deque<int>{}, Lane), 0u);
  EXPECT_EQ(lanes.Pick(std::deque<int>{3, 2, 1}, Lane), 0u);
  lanes.Begin(3);
  lanes.Begin(2);
  lanes.Begin(1);
  EXPECT_EQ(lanes.Pick(std::deque<int>{3, 2, 1}, Lane), 0u);
}

TEST(CopyLanesTest, LooksNoFurtherThanItsWindow) {
  CopyLanes lanes;
  lanes.Begin(0);
  std::deque<int> queue(10, 0);
  queue.push_back(1);  // idle lane, but past a window of 10
  EXPECT_EQ(lanes.Pick(queue, Lane, 10), 0u);
  EXPECT_EQ(lanes.Pick(queue, Lane, 11), 10u);
}

TEST(CopyLanesTest, EndOfAnUnknownLaneIsHarmless) {
  CopyLanes lanes;
  lanes.End(7);
  EXPECT_EQ(lanes.running(7), 0u);
}

}  // namespace
}  // namespace gdr
