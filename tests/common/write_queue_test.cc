// Unit tests of common/grpc/write_queue.h with a fake reactor that records its writes and its end:
// order, one write outstanding, packing several items into one write, the end action exactly
// once after the queue drains, a failed write, Discard, and items queued after the end.
#include "common/grpc/write_queue.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gdr {
namespace {

// Stands in for a reactor: each write carries up to `per_write` items; Complete() is the
// reaction to the outstanding write.
struct FakeReactor {
  explicit FakeReactor(size_t per_write = 1)
      : per_write(per_write),
        writes(
            [this](std::deque<std::string>& queue) {
              EXPECT_FALSE(outstanding) << "a second write started before the first completed";
              outstanding = true;
              const size_t n = std::min(queue.size(), this->per_write);
              std::string message;
              for (size_t i = 0; i < n; ++i) message += std::move(queue[i]);
              written.push_back(message);
              return n;
            },
            [this](bool all_written) { ends.push_back(all_written); }) {}

  void Complete(bool ok = true) {
    ASSERT_TRUE(outstanding) << "no write to complete";
    outstanding = false;
    writes.OnWriteDone(ok);
  }

  size_t per_write;
  bool outstanding = false;
  std::vector<std::string> written;
  std::vector<bool> ends;
  WriteQueue<std::string> writes;
};

TEST(WriteQueueTest, WritesInOrderOneAtATime) {
  FakeReactor r;
  EXPECT_TRUE(r.writes.Push("a"));
  EXPECT_TRUE(r.writes.Push("b"));
  EXPECT_TRUE(r.writes.Push("c"));
  EXPECT_EQ(r.written, std::vector<std::string>({"a"}));
  EXPECT_TRUE(r.writes.writing());
  EXPECT_EQ(r.writes.queued(), 2u);
  r.Complete();
  EXPECT_EQ(r.written, std::vector<std::string>({"a", "b"}));
  r.Complete();
  r.Complete();
  EXPECT_EQ(r.written, std::vector<std::string>({"a", "b", "c"}));
  EXPECT_FALSE(r.writes.writing());
  EXPECT_EQ(r.writes.queued(), 0u);
  EXPECT_TRUE(r.ends.empty()) << "nobody asked for the end";
}

TEST(WriteQueueTest, ItemsQueuedDuringAWriteLeaveTogetherUpToTheLimit) {
  FakeReactor r(/*per_write=*/2);
  r.writes.Push("a");
  for (const char* s : {"b", "c", "d"}) r.writes.Push(s);
  EXPECT_EQ(r.writes.queued(), 3u);
  r.Complete();
  EXPECT_EQ(r.written, std::vector<std::string>({"a", "bc"}));
  EXPECT_EQ(r.writes.queued(), 1u);
  r.Complete();
  r.Complete();
  EXPECT_EQ(r.written, std::vector<std::string>({"a", "bc", "d"}));
}

TEST(WriteQueueTest, EnqueueWaitsForFlush) {
  FakeReactor r(/*per_write=*/8);
  EXPECT_TRUE(r.writes.Enqueue("a"));
  EXPECT_TRUE(r.writes.Enqueue("b"));
  EXPECT_TRUE(r.written.empty());
  r.writes.Flush();
  EXPECT_EQ(r.written, std::vector<std::string>({"ab"}));
}

TEST(WriteQueueTest, EndRunsOnceAfterTheQueueDrains) {
  FakeReactor r;
  r.writes.Push("a");
  r.writes.Push("b");
  r.writes.EndWhenDrained();
  EXPECT_TRUE(r.writes.ending());
  EXPECT_TRUE(r.writes.Push("c")) << "items queued before the end still go out";
  r.Complete();
  r.Complete();
  EXPECT_TRUE(r.ends.empty());
  r.Complete();
  EXPECT_EQ(r.written, std::vector<std::string>({"a", "b", "c"}));
  EXPECT_EQ(r.ends, std::vector<bool>({true}));
  EXPECT_TRUE(r.writes.ended());
  r.writes.EndWhenDrained();
  r.writes.Flush();
  r.writes.Discard();
  EXPECT_EQ(r.ends, std::vector<bool>({true}));
}

TEST(WriteQueueTest, EndRunsAtOnceWhenNothingIsQueued) {
  FakeReactor r;
  r.writes.EndWhenDrained();
  EXPECT_EQ(r.ends, std::vector<bool>({true}));
  EXPECT_TRUE(r.written.empty());
}

TEST(WriteQueueTest, ItemsAfterTheEndAreDropped) {
  FakeReactor r;
  r.writes.EndWhenDrained();
  EXPECT_FALSE(r.writes.Push("late"));
  EXPECT_FALSE(r.writes.Enqueue("later"));
  r.writes.Flush();
  EXPECT_TRUE(r.written.empty());
  EXPECT_EQ(r.writes.queued(), 0u);
}

TEST(WriteQueueTest, AFailedWriteDropsTheRestAndEndsNotAllWritten) {
  FakeReactor r;
  r.writes.Push("a");
  r.writes.Push("b");
  r.Complete(/*ok=*/false);
  EXPECT_EQ(r.written, std::vector<std::string>({"a"}));
  EXPECT_TRUE(r.writes.discarded());
  EXPECT_FALSE(r.writes.writing());
  EXPECT_EQ(r.writes.queued(), 0u);
  EXPECT_FALSE(r.writes.Push("c"));
  EXPECT_EQ(r.written.size(), 1u);
  EXPECT_TRUE(r.ends.empty()) << "the end waits until it is asked for";
  r.writes.EndWhenDrained();
  EXPECT_EQ(r.ends, std::vector<bool>({false}));
}

TEST(WriteQueueTest, AFailedWriteWhileEndingEndsAtOnce) {
  FakeReactor r;
  r.writes.Push("a");
  r.writes.Push("b");
  r.writes.EndWhenDrained();
  r.Complete(/*ok=*/false);
  EXPECT_EQ(r.written, std::vector<std::string>({"a"}));
  EXPECT_EQ(r.ends, std::vector<bool>({false}));
}

TEST(WriteQueueTest, DiscardLetsTheOutstandingWriteCompleteBeforeTheEnd) {
  FakeReactor r;
  r.writes.Push("a");
  r.writes.Push("b");
  r.writes.Discard();
  r.writes.EndWhenDrained();
  EXPECT_TRUE(r.ends.empty()) << "a write is still outstanding";
  EXPECT_FALSE(r.writes.Push("c"));
  r.Complete();
  EXPECT_EQ(r.written, std::vector<std::string>({"a"}));
  EXPECT_EQ(r.ends, std::vector<bool>({false}));
}

TEST(WriteQueueTest, ItemsOfTheOutstandingWriteStayInPlaceUntilItCompletes) {
  // The write holds a pointer to its message, as gRPC's StartWrite does.
  const std::string* front = nullptr;
  WriteQueue<std::string> writes(
      [&](std::deque<std::string>& queue) {
        front = &queue.front();
        return size_t{1};
      },
      [](bool) {});
  writes.Push("first");
  for (int i = 0; i < 1000; ++i) writes.Push("more");
  writes.Discard();
  EXPECT_EQ(*front, "first");
  writes.OnWriteDone(true);
}

}  // namespace
}  // namespace gdr
