// Unit tests of common/base/completion_batch.h: deferral only inside a batch, one flush per key,
// nesting, re-deferral from a flush, and batches being per thread.
#include "common/base/completion_batch.h"

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gdr {
namespace {

TEST(CompletionBatchTest, OutsideABatchNothingIsDeferred) {
  EXPECT_FALSE(CompletionBatch::Open());
  int runs = 0;
  const int key = 0;
  EXPECT_FALSE(CompletionBatch::Defer(&key, [&] { ++runs; }));
  EXPECT_EQ(runs, 0);
}

TEST(CompletionBatchTest, EachKeyFlushesOnceInFirstDeferredOrderAtClose) {
  std::string log;
  const int a = 0, b = 0;
  {
    CompletionBatch batch;
    EXPECT_TRUE(CompletionBatch::Open());
    EXPECT_TRUE(CompletionBatch::Defer(&a, [&] { log += "a"; }));
    EXPECT_TRUE(CompletionBatch::Defer(&b, [&] { log += "b"; }));
    EXPECT_TRUE(CompletionBatch::Defer(&a, [&] { log += "A"; }));  // a is queued already
    EXPECT_EQ(log, "");
  }
  EXPECT_EQ(log, "ab");
  EXPECT_FALSE(CompletionBatch::Open());
}

TEST(CompletionBatchTest, InnerBatchLeavesFlushingToTheOuterOne) {
  int runs = 0;
  const int key = 0;
  {
    CompletionBatch outer;
    {
      CompletionBatch inner;
      EXPECT_TRUE(CompletionBatch::Defer(&key, [&] { ++runs; }));
    }
    EXPECT_EQ(runs, 0);
    EXPECT_TRUE(CompletionBatch::Open());
  }
  EXPECT_EQ(runs, 1);
}

TEST(CompletionBatchTest, WorkDeferredByAFlushRunsBeforeTheBatchCloses) {
  std::vector<int> order;
  const int key = 0;
  {
    CompletionBatch batch;
    CompletionBatch::Defer(&key, [&] {
      order.push_back(1);
      // The same key again: its first flush is running, so this is a new one.
      EXPECT_TRUE(CompletionBatch::Defer(&key, [&] { order.push_back(2); }));
    });
  }
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_FALSE(CompletionBatch::Open());
}

TEST(CompletionBatchTest, ABatchBelongsToItsThread) {
  CompletionBatch batch;
  bool open_elsewhere = true;
  bool deferred_elsewhere = true;
  const int key = 0;
  std::thread other([&] {
    open_elsewhere = CompletionBatch::Open();
    deferred_elsewhere = CompletionBatch::Defer(&key, [] {});
  });
  other.join();
  EXPECT_FALSE(open_elsewhere);
  EXPECT_FALSE(deferred_elsewhere);
}

}  // namespace
}  // namespace gdr
