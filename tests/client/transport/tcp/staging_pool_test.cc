// The tcp target's staging pipes kept per GPU across links (client/src/transport/tcp/
// staging_pool.h), with a fake pipe: what is made, when, and what is handed out again.
#include "client/src/transport/tcp/staging_pool.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace gdr {
namespace {

struct FakePipe {
  int gpu;
  int serial;
  int ordinal() const { return gpu; }
};

class StagingPoolTest : public ::testing::Test {
 protected:
  StagingPool<FakePipe> pool_{[this](int ordinal) -> absl::StatusOr<std::unique_ptr<FakePipe>> {
    if (fail_) return absl::ResourceExhaustedError("no pinned memory");
    return std::make_unique<FakePipe>(FakePipe{ordinal, ++made_});
  }};
  std::atomic<int> made_{0};
  bool fail_ = false;
};

TEST_F(StagingPoolTest, PrewarmMakesTheCountOnceAndLinksTakeThoseFirst) {
  ASSERT_TRUE(pool_.Prewarm(0, 3).ok());
  ASSERT_TRUE(pool_.Prewarm(0, 3).ok());  // a second registration on GPU 0 makes none
  EXPECT_EQ(made_, 3);
  EXPECT_EQ(pool_.idle(0), 3u);
  std::vector<std::unique_ptr<FakePipe>> taken;
  for (int i = 0; i < 3; ++i) taken.push_back(*pool_.Take(0));
  EXPECT_EQ(made_, 3) << "a link took a prewarmed pipe, not a new one";
  EXPECT_EQ(pool_.idle(0), 0u);
  std::unique_ptr<FakePipe> fourth = *pool_.Take(0);  // past them: made on demand
  EXPECT_EQ(made_, 4);
  EXPECT_EQ(fourth->serial, 4);
}

TEST_F(StagingPoolTest, APipeGivenBackServesTheNextLinkOfItsGpuOnly) {
  std::unique_ptr<FakePipe> p = *pool_.Take(2);
  const int serial = p->serial;
  pool_.Give(std::move(p));
  EXPECT_EQ(pool_.idle(2), 1u);
  std::unique_ptr<FakePipe> other = *pool_.Take(1);  // another GPU: a pipe of its own
  EXPECT_EQ(other->ordinal(), 1);
  EXPECT_NE(other->serial, serial);
  std::unique_ptr<FakePipe> again = *pool_.Take(2);
  EXPECT_EQ(again->serial, serial);
  pool_.Give(nullptr);  // harmless
}

TEST_F(StagingPoolTest, AFailedPrewarmSaysWhyAndLeavesRoomToTryAgain) {
  fail_ = true;
  absl::Status s = pool_.Prewarm(0, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool_.Take(0).status().code(), absl::StatusCode::kResourceExhausted);
  fail_ = false;
  ASSERT_TRUE(pool_.Prewarm(0, 2).ok());
  EXPECT_EQ(pool_.idle(0), 2u);
}

TEST_F(StagingPoolTest, ConcurrentRegistrationsMakeTheCountNotMore) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([this] { EXPECT_TRUE(pool_.Prewarm(5, 4).ok()); });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(pool_.idle(5), 4u);
  EXPECT_EQ(made_, 4);
}

}  // namespace
}  // namespace gdr
