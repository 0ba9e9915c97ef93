// gdrctl bench's live progress line: the rate covers the last interval only, the time left
// follows the average so far, and durations and the line read as documented.
#include "client/gdrctl/bench_progress.h"

#include <gtest/gtest.h>

namespace gdrctl {
namespace {

TEST(FormatDurationTest, SecondsMinutesHours) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(-3), "0s");
  EXPECT_EQ(FormatDuration(7.4), "7s");
  EXPECT_EQ(FormatDuration(7.6), "8s");
  EXPECT_EQ(FormatDuration(59.4), "59s");
  EXPECT_EQ(FormatDuration(60), "1m00s");
  EXPECT_EQ(FormatDuration(125), "2m05s");
  EXPECT_EQ(FormatDuration(3599), "59m59s");
  EXPECT_EQ(FormatDuration(3600), "1h00m00s");
  EXPECT_EQ(FormatDuration(3723), "1h02m03s");
  EXPECT_EQ(FormatDuration(100 * 3600 + 61), "100h01m01s");
}

TEST(BenchProgressTest, RateIsOverTheLastIntervalNotTheAverage) {
  BenchProgress p(1000, 1 << 20);  // 1000 ops of 1 MiB
  p.Update(100, 1.0);
  EXPECT_DOUBLE_EQ(p.ops_per_sec(), 100);
  // 300 more ops in the next 2 s: 150 ops/s now, although the average is 133.
  p.Update(400, 3.0);
  EXPECT_DOUBLE_EQ(p.ops_per_sec(), 150);
  EXPECT_DOUBLE_EQ(p.gbps(), 150.0 * (1 << 20) / 1e9);
  // A stall shows at once as zero.
  p.Update(400, 4.0);
  EXPECT_DOUBLE_EQ(p.ops_per_sec(), 0);
  EXPECT_DOUBLE_EQ(p.gbps(), 0);
}

TEST(BenchProgressTest, TimeLeftFollowsTheAverageRate) {
  BenchProgress p(1000, 4096);
  p.Update(250, 5.0);  // 50 ops/s on average: 750 left take 15 s
  EXPECT_DOUBLE_EQ(p.eta_seconds(), 15);
  p.Update(500, 6.0);  // a burst: 250 ops/s now, 83.3 on average; 500 left take 6 s
  EXPECT_DOUBLE_EQ(p.eta_seconds(), 6);
  p.Update(1000, 7.0);
  EXPECT_DOUBLE_EQ(p.eta_seconds(), 0);
}

TEST(BenchProgressTest, NothingDoneYetHasNoEstimate) {
  BenchProgress p(10, 4096);
  const std::string line = p.Update(0, 1.0);
  EXPECT_DOUBLE_EQ(p.eta_seconds(), -1);
  EXPECT_DOUBLE_EQ(p.ops_per_sec(), 0);
  EXPECT_EQ(line, "[  0.0%] 0/10 ops [0.000 GB/s, 0 ops/s] [elapsed 1s, eta --]");
}

TEST(BenchProgressTest, SameInstantKeepsTheLastRate) {
  BenchProgress p(100, 1000000);
  p.Update(10, 1.0);
  EXPECT_DOUBLE_EQ(p.ops_per_sec(), 10);
  // A second sample at the same time has no interval to measure: the rate is not made up.
  p.Update(12, 1.0);
  EXPECT_DOUBLE_EQ(p.ops_per_sec(), 10);
}

TEST(BenchProgressTest, LineShowsDoneTotalRateElapsedAndEta) {
  BenchProgress p(10000, 1 << 20);
  p.Update(1000, 1.0);
  const std::string line = p.Update(4200, 5.0);
  // 3200 ops in 4 s = 800 ops/s of 1 MiB = 0.839 GB/s; 5800 left at 840 ops/s average = 7 s.
  EXPECT_EQ(line, "[ 42.0%] 4200/10000 ops [0.839 GB/s, 800 ops/s] [elapsed 5s, eta 7s]");
}

}  // namespace
}  // namespace gdrctl
