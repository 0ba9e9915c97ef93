// Unit tests of the op accounting (daemon/stats.h): histogram buckets and percentiles, counter
// scopes, errors by code, in-flight bookkeeping.
#include "daemon/observe/stats.h"

#include <random>

#include "gtest/gtest.h"

namespace gdr {
namespace {

TEST(LatencyHistogramTest, BucketsAreMonotonicAndBoundsHold) {
  int prev = 0;
  for (uint64_t ns = 1; ns < (uint64_t{1} << 36); ns = ns * 9 / 8 + 1) {
    const int b = LatencyHistogram::BucketOf(ns);
    EXPECT_GE(b, prev) << ns;
    EXPECT_LE(ns, LatencyHistogram::BucketUpperNs(b)) << ns;
    if (b > 0) {
      EXPECT_GT(ns, LatencyHistogram::BucketUpperNs(b - 1) - 1) << ns;
    }
    prev = b;
  }
}

TEST(LatencyHistogramTest, PercentilesWithinABucketOfTheTruth) {
  LatencyHistogram h;
  EXPECT_EQ(h.Percentile(0.5), 0u);
  std::mt19937_64 rng(1);
  std::vector<uint64_t> v;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t ns = 1000 + rng() % 10'000'000;
    v.push_back(ns);
    h.Record(ns);
  }
  std::sort(v.begin(), v.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const double truth = static_cast<double>(v[static_cast<size_t>(q * v.size()) - 1]);
    EXPECT_NEAR(h.Percentile(q) / truth, 1.0, 0.13) << q;
  }
  EXPECT_EQ(h.max_ns(), v.back());
  EXPECT_EQ(h.count(), v.size());
}

TEST(DaemonStatsTest, ScopesAndErrors) {
  DaemonStats s({"a", "b"});
  const OpScopes tcp_a = s.Resolve(TransportKind::kTcp, "a");
  ASSERT_NE(tcp_a.transport, nullptr);
  ASSERT_NE(tcp_a.volume, nullptr);
  const OpScopes nowhere = s.Resolve(std::nullopt, "zz");
  EXPECT_EQ(nowhere.transport, nullptr);
  EXPECT_EQ(nowhere.volume, nullptr);

  s.Started(tcp_a, 100);
  EXPECT_EQ(s.total().inflight_ops(), 1);
  EXPECT_EQ(tcp_a.volume->inflight_ops(), 1);
  s.Finished(tcp_a, Direction::kStoreToClient, absl::StatusCode::kOk, 100, 5000, true);
  s.Started(tcp_a, 7);
  s.Finished(tcp_a, Direction::kClientToStore, absl::StatusCode::kDataLoss, 7, 5000, true);
  s.Finished(nowhere, Direction::kStoreToClient, absl::StatusCode::kNotFound, 0, 0, false);
  EXPECT_EQ(s.total().inflight_ops(), 0);
  EXPECT_EQ(s.total().ops(Direction::kStoreToClient), 1u);
  EXPECT_EQ(s.total().bytes(Direction::kStoreToClient), 100u);
  EXPECT_EQ(s.total().ops(Direction::kClientToStore), 0u);
  EXPECT_EQ(s.total().errors(absl::StatusCode::kDataLoss), 1u);
  EXPECT_EQ(s.total().errors(absl::StatusCode::kNotFound), 1u);
  EXPECT_EQ(tcp_a.volume->errors(absl::StatusCode::kNotFound), 0u);

  gdrstore::v1::GetStatsResponse r;
  s.Fill(&r);
  ASSERT_EQ(r.volumes_size(), 2);
  EXPECT_EQ(r.volumes(0).ops().write_ops(), 1u);
  EXPECT_EQ(r.volumes(1).ops().write_ops(), 0u);
  ASSERT_EQ(r.total().errors_size(), 2);
  EXPECT_EQ(r.total().errors(0).name(), "NOT_FOUND");
  EXPECT_EQ(r.total().errors(1).name(), "DATA_LOSS");
  EXPECT_EQ(r.total().write_latency().count(), 1u);
}

}  // namespace
}  // namespace gdr
