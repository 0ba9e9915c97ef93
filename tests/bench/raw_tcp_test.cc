// bench/raw_tcp: the stream count a baseline takes from the clients' links, how the product's
// bytes are spread over those streams, and one small plan run over real loopback connections.
#include "bench/raw_tcp.h"

#include <gtest/gtest.h>

#include <vector>

namespace gdrbench {
namespace {

constexpr uint64_t kMiB = 1 << 20;

TEST(BaselineStreamsTest, IsTheSumOfTheClientsLinks) {
  EXPECT_EQ(BaselineStreams({16}), 16u);
  EXPECT_EQ(BaselineStreams({16, 16, 8, 3}), 43u);
}

TEST(BaselineStreamsTest, CountsAClientWithoutLinksAsOneAndNeverGivesZero) {
  EXPECT_EQ(BaselineStreams({0}), 1u);
  EXPECT_EQ(BaselineStreams({0, 5, 0}), 7u);
  EXPECT_EQ(BaselineStreams({}), 1u);
}

TEST(PlanStreamsTest, SpreadsTheProductsBytesOverTheStreamsInFrames) {
  // gdr_bench's default line: 8 x 64 MiB over a lone client's 16 links.
  const StreamPlan p = PlanStreams(8 * 64 * kMiB, 16, 64 * kMiB);
  EXPECT_EQ(p.streams, 16u);
  EXPECT_EQ(p.write_bytes, kProductChunk);
  EXPECT_EQ(p.writes, 32u);
  EXPECT_EQ(p.bytes(), 8 * 64 * kMiB);
}

TEST(PlanStreamsTest, WritesNoMoreThanAnOpAndRoundsSharesUpToWholeWrites) {
  const StreamPlan small = PlanStreams(10 * 4096, 3, 4096);
  EXPECT_EQ(small.write_bytes, 4096u);
  EXPECT_EQ(small.writes, 4u);  // 10 writes' bytes over 3 streams: 4 each
  EXPECT_GE(small.bytes(), 10u * 4096);
  const StreamPlan one = PlanStreams(1, 1, 64 * kMiB);
  EXPECT_EQ(one.writes, 1u);
  EXPECT_EQ(one.write_bytes, kProductChunk);
}

TEST(PlanStreamsTest, NeverPlansZeroStreamsOrWrites) {
  const StreamPlan p = PlanStreams(0, 0, 0);
  EXPECT_EQ(p.streams, 1u);
  EXPECT_GE(p.write_bytes, 1u);
  EXPECT_GE(p.writes, 1u);
}

TEST(RawTcpStreamsTest, RunsAPlanOverItsOwnBuffersAndMovesItsBytes) {
  StreamBuffers buffers;
  const StreamPlan p = PlanStreams(6 * 64 * 1024, 3, 64 * 1024);
  absl::StatusOr<StreamsResult> r = RawTcpStreams(p, &buffers);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bytes, p.bytes());
  EXPECT_EQ(buffers.src.size(), 3u);
  EXPECT_GT(r->gbps, 0);
  // A larger write replaces the buffers rather than overrunning them.
  const StreamPlan bigger = PlanStreams(2 * kMiB, 2, kMiB);
  r = RawTcpStreams(bigger, &buffers);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(buffers.src.size(), 2u);
  EXPECT_GE(buffers.dst[0]->size(), kMiB);
}

}  // namespace
}  // namespace gdrbench
