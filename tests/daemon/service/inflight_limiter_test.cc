// Unit tests of daemon-wide admission control (daemon/inflight_limiter.h).
#include "daemon/service/inflight_limiter.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;
using Permit = InflightLimiter::Permit;

TEST(InflightLimiterTest, OpsLimit) {
  InflightLimiter lim(2, 1 << 20);
  Permit a, b, c;
  ASSERT_TRUE(lim.TryAcquire(10, &a).ok());
  ASSERT_TRUE(lim.TryAcquire(10, &b).ok());
  absl::Status s = lim.TryAcquire(10, &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("max_inflight_ops"));
  // A refusal takes nothing.
  EXPECT_EQ(lim.ops(), 2u);
  EXPECT_EQ(lim.bytes(), 20u);
  a.Release();
  EXPECT_EQ(lim.ops(), 1u);
  EXPECT_EQ(lim.bytes(), 10u);
  EXPECT_TRUE(lim.TryAcquire(10, &c).ok());
  EXPECT_EQ(lim.ops(), 2u);
}

TEST(InflightLimiterTest, BytesLimit) {
  InflightLimiter lim(100, 100);
  Permit a, b, c;
  ASSERT_TRUE(lim.TryAcquire(60, &a).ok());
  ASSERT_TRUE(lim.TryAcquire(40, &b).ok());  // exactly at the limit
  absl::Status s = lim.TryAcquire(1, &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("max_inflight_bytes"));
  EXPECT_EQ(lim.ops(), 2u);
  EXPECT_EQ(lim.bytes(), 100u);
  b.Release();
  EXPECT_EQ(lim.TryAcquire(41, &c).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(lim.TryAcquire(40, &c).ok());
  EXPECT_EQ(lim.bytes(), 100u);
}

TEST(InflightLimiterTest, PermitReleasesOnDestructionExactlyOnce) {
  InflightLimiter lim(4, 1000);
  {
    Permit a;
    ASSERT_TRUE(lim.TryAcquire(300, &a).ok());
    EXPECT_EQ(lim.ops(), 1u);
    Permit moved(std::move(a));
    a.Release();  // moved-from: no-op
    EXPECT_EQ(lim.ops(), 1u);
    EXPECT_EQ(lim.bytes(), 300u);
    moved.Release();
    moved.Release();  // idempotent
    EXPECT_EQ(lim.ops(), 0u);
    EXPECT_EQ(lim.bytes(), 0u);
    ASSERT_TRUE(lim.TryAcquire(200, &moved).ok());
  }
  EXPECT_EQ(lim.ops(), 0u);
  EXPECT_EQ(lim.bytes(), 0u);
}

TEST(InflightLimiterTest, MoveAssignReleasesTheOldPermit) {
  InflightLimiter lim(4, 1000);
  Permit a, b;
  ASSERT_TRUE(lim.TryAcquire(100, &a).ok());
  ASSERT_TRUE(lim.TryAcquire(200, &b).ok());
  EXPECT_EQ(lim.bytes(), 300u);
  a = std::move(b);  // a's 100 go back, b's 200 now belong to a
  EXPECT_EQ(lim.ops(), 1u);
  EXPECT_EQ(lim.bytes(), 200u);
  a = Permit();
  EXPECT_EQ(lim.ops(), 0u);
  EXPECT_EQ(lim.bytes(), 0u);
}

TEST(InflightLimiterTest, AcquireIntoAHeldPermitReleasesItFirst) {
  InflightLimiter lim(4, 1000);
  Permit a;
  ASSERT_TRUE(lim.TryAcquire(100, &a).ok());
  ASSERT_TRUE(lim.TryAcquire(50, &a).ok());
  EXPECT_EQ(lim.ops(), 1u);
  EXPECT_EQ(lim.bytes(), 50u);
}

TEST(InflightLimiterTest, OversizeOpIsAdmittedOnlyAlone) {
  InflightLimiter lim(10, 100);
  Permit big, small;
  ASSERT_TRUE(lim.TryAcquire(500, &big).ok());  // nothing in flight: admitted
  EXPECT_EQ(lim.bytes(), 500u);
  EXPECT_EQ(lim.TryAcquire(1, &small).code(), absl::StatusCode::kResourceExhausted);
  big.Release();
  ASSERT_TRUE(lim.TryAcquire(1, &small).ok());
  // With anything in flight, an oversize op waits.
  Permit big2;
  EXPECT_EQ(lim.TryAcquire(500, &big2).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(lim.ops(), 1u);
  EXPECT_EQ(lim.bytes(), 1u);
  small.Release();
  EXPECT_TRUE(lim.TryAcquire(500, &big2).ok());
}

TEST(InflightLimiterTest, ConcurrentUseNeverExceedsTheOpsLimit) {
  constexpr uint32_t kMaxOps = 3;
  InflightLimiter lim(kMaxOps, 1 << 30);
  std::atomic<int> held{0};
  std::atomic<int> peak{0};
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        Permit p;
        if (!lim.TryAcquire(1, &p).ok()) continue;
        const int now = held.fetch_add(1) + 1;
        int prev = peak.load();
        while (now > prev && !peak.compare_exchange_weak(prev, now)) {
        }
        granted.fetch_add(1);
        held.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), static_cast<int>(kMaxOps));
  EXPECT_GT(granted.load(), 0);
  EXPECT_EQ(lim.ops(), 0u);
  EXPECT_EQ(lim.bytes(), 0u);
}

}  // namespace
}  // namespace gdr
