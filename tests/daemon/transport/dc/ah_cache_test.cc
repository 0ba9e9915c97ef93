#include "daemon/transport/dc/ah_cache.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/time/clock.h"

#include "tests/daemon/transport/dc/fake_dc_device.h"

namespace gdr::dc {
namespace {

using testing::FakeAh;
using testing::FakeDcDevice;

AhKey Key(uint8_t b, uint16_t lid = 0) {
  AhKey k;
  k.gid[0] = 0xfe;
  k.gid[15] = b;
  k.lid = lid;
  return k;
}

TEST(AhCacheTest, SecondLookupOfAPortReusesItsAh) {
  FakeDcDevice dev(FakeDcDevice::ConnectX6Caps());
  AhSettings routed;
  routed.hop_limit = 16;
  routed.traffic_class = 106;
  routed.service_level = 3;
  AhCache cache(&dev, routed, 4);
  auto a = cache.Get(Key(1));
  auto b = cache.Get(Key(1));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(dev.ah_creates(), 1);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 1u);
  // The routing settings reach the AH (hop_limit > 1 crosses routers).
  auto* fake = dynamic_cast<FakeAh*>(a->get());
  ASSERT_NE(fake, nullptr);
  EXPECT_EQ(fake->settings.hop_limit, 16);
  EXPECT_EQ(fake->settings.traffic_class, 106);
  EXPECT_EQ(fake->settings.service_level, 3);
}

TEST(AhCacheTest, GidAndLidAreDifferentKeys) {
  FakeDcDevice dev(FakeDcDevice::ConnectX6Caps());
  AhCache cache(&dev, {}, 4);
  ASSERT_TRUE(cache.Get(Key(1, 0)).ok());
  ASSERT_TRUE(cache.Get(Key(1, 7)).ok());
  ASSERT_TRUE(cache.Get(Key(2, 0)).ok());
  EXPECT_EQ(dev.ah_creates(), 3);
  EXPECT_EQ(cache.size(), 3u);
}

TEST(AhCacheTest, EvictsTheLeastRecentlyUsedAndStaysBounded) {
  FakeDcDevice dev(FakeDcDevice::ConnectX6Caps());
  AhCache cache(&dev, {}, 2);
  ASSERT_TRUE(cache.Get(Key(1)).ok());
  ASSERT_TRUE(cache.Get(Key(2)).ok());
  ASSERT_TRUE(cache.Get(Key(1)).ok());  // 1 is now more recent than 2
  ASSERT_TRUE(cache.Get(Key(3)).ok());  // evicts 2
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(dev.live_ahs(), 2) << "the evicted AH was destroyed (nobody held it)";
  const int creates = dev.ah_creates();
  ASSERT_TRUE(cache.Get(Key(1)).ok());
  EXPECT_EQ(dev.ah_creates(), creates) << "1 survived";
  ASSERT_TRUE(cache.Get(Key(2)).ok());
  EXPECT_EQ(dev.ah_creates(), creates + 1) << "2 was evicted and is made again";
  for (uint8_t i = 10; i < 100; ++i) ASSERT_TRUE(cache.Get(Key(i)).ok());
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(dev.live_ahs(), 2);
}

TEST(AhCacheTest, AnEvictedAhLivesUntilItsLastHolderLetsGo) {
  FakeDcDevice dev(FakeDcDevice::ConnectX6Caps());
  AhCache cache(&dev, {}, 1);
  auto held = cache.Get(Key(1));  // an op in flight holds it
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(cache.Get(Key(2)).ok());
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(dev.live_ahs(), 2) << "evicted but still named by a posted WR";
  held->reset();
  EXPECT_EQ(dev.live_ahs(), 1);
}

TEST(AhCacheTest, FailedCreateIsReportedAndNotCached) {
  FakeDcDevice dev(FakeDcDevice::ConnectX6Caps());
  AhCache cache(&dev, {}, 4);
  dev.set_fail_create_ah(true);
  auto a = cache.Get(Key(1));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("ibv_create_ah"), std::string::npos) << a.status();
  EXPECT_EQ(cache.size(), 0u);
  dev.set_fail_create_ah(false);
  EXPECT_TRUE(cache.Get(Key(1)).ok());
  EXPECT_EQ(dev.ah_creates(), 2);
}

TEST(AhCacheTest, InvalidateForcesANewAh) {
  FakeDcDevice dev(FakeDcDevice::ConnectX6Caps());
  AhCache cache(&dev, {}, 4);
  ASSERT_TRUE(cache.Get(Key(1)).ok());
  cache.Invalidate(Key(1));
  cache.Invalidate(Key(9));  // unknown: no effect
  EXPECT_EQ(cache.size(), 0u);
  ASSERT_TRUE(cache.Get(Key(1)).ok());
  EXPECT_EQ(dev.ah_creates(), 2);
}

// Waits (without a deadline: a hang is the failure) until `n` Gets wait for another's creation.
void AwaitWaiters(const AhCache& cache, uint32_t n) {
  while (cache.waiting() < n) absl::SleepFor(absl::Milliseconds(1));
}

// ibv_create_ah may wait about a second for RoCE neighbour resolution: it must not hold the
// cache's lock, which every Submit takes. Against a cache that creates under its lock the hit
// below never returns (the test times out).
TEST(AhCacheTest, AHitOnAnotherKeyCompletesWhileACreationBlocks) {
  FakeDcDevice dev(FakeDcDevice::ConnectX6Caps());
  AhCache cache(&dev, {}, 4);
  ASSERT_TRUE(cache.Get(Key(2)).ok());
  dev.HoldCreateAh(Key(1));
  absl::StatusOr<std::shared_ptr<AddressHandle>> slow;
  std::thread t([&] { slow = cache.Get(Key(1)); });
  dev.AwaitBlockedCreates(1);
  auto hit = cache.Get(Key(2));
  EXPECT_TRUE(hit.ok()) << hit.status();
  auto other = cache.Get(Key(3));  // a miss on a third key is created meanwhile too
  EXPECT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(cache.size(), 2u) << "2 and 3 cached; 1 still being created";
  dev.ReleaseCreateAh();
  t.join();
  ASSERT_TRUE(slow.ok()) << slow.status();
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(dev.ah_creates(), 3);
}

TEST(AhCacheTest, TwoGetsOfOneKeyMakeOneAh) {
  FakeDcDevice dev(FakeDcDevice::ConnectX6Caps());
  AhCache cache(&dev, {}, 4);
  dev.HoldCreateAh(Key(1));
  absl::StatusOr<std::shared_ptr<AddressHandle>> a, b;
  std::thread ta([&] { a = cache.Get(Key(1)); });
  dev.AwaitBlockedCreates(1);
  std::thread tb([&] { b = cache.Get(Key(1)); });
  AwaitWaiters(cache, 1);
  dev.ReleaseCreateAh();
  ta.join();
  tb.join();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get()) << "the waiter shares the one creation";
  EXPECT_EQ(dev.ah_creates(), 1);
  EXPECT_EQ(dev.live_ahs(), 1);
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.waiting(), 0u);
}

TEST(AhCacheTest, AFailedCreationWakesItsWaitersWithTheErrorAndIsNotCached) {
  FakeDcDevice dev(FakeDcDevice::ConnectX6Caps());
  AhCache cache(&dev, {}, 4);
  dev.set_fail_create_ah(true);
  dev.HoldCreateAh(Key(1));
  absl::StatusOr<std::shared_ptr<AddressHandle>> a, b;
  std::thread ta([&] { a = cache.Get(Key(1)); });
  dev.AwaitBlockedCreates(1);
  std::thread tb([&] { b = cache.Get(Key(1)); });
  AwaitWaiters(cache, 1);
  dev.ReleaseCreateAh();
  ta.join();
  tb.join();
  ASSERT_FALSE(a.ok());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("ibv_create_ah"), std::string::npos) << b.status();
  EXPECT_EQ(dev.ah_creates(), 1) << "the waiter did not try again on its own";
  EXPECT_EQ(cache.size(), 0u);
  dev.set_fail_create_ah(false);
  EXPECT_TRUE(cache.Get(Key(1)).ok()) << "the failure was not cached";
  EXPECT_EQ(dev.ah_creates(), 2);
}

TEST(AhCacheTest, InvalidateDuringACreationKeepsItsResultOutOfTheCache) {
  FakeDcDevice dev(FakeDcDevice::ConnectX6Caps());
  AhCache cache(&dev, {}, 4);
  dev.HoldCreateAh(Key(1));
  absl::StatusOr<std::shared_ptr<AddressHandle>> a;
  std::thread ta([&] { a = cache.Get(Key(1)); });
  dev.AwaitBlockedCreates(1);
  cache.Invalidate(Key(1));  // the route changed while it was being resolved
  dev.ReleaseCreateAh();
  ta.join();
  EXPECT_TRUE(a.ok()) << "the caller still gets its AH";
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace gdr::dc
