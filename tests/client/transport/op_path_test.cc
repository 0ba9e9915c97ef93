// How an op's path is named and judged against ClientOptions::require (op_path.h).
#include "client/src/transport/op_path.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "client/src/transport/region.h"

namespace gdr {
namespace {

TEST(OpPathTest, HopNamesTransportDeviceAndWay) {
  Region host;
  EXPECT_EQ(Hop("tcp", "", host), "tcp/host");
  EXPECT_EQ(Hop("rc", "mlx5_0", host), "rc:mlx5_0/host");
  EXPECT_EQ(Hop("agent", "", host), "agent/host");
  // GPU memory's way is the registration's (gdrctl_gpu_test and the GPU host's checks).
}

TEST(OpPathTest, JoinPutsTheClientsHopFirst) {
  EXPECT_EQ(JoinPath("agent/host", "tcp/host"), "agent/host>tcp/host");
  EXPECT_EQ(JoinPath("tcp/host", ""), "tcp/host");
  EXPECT_EQ(JoinPath("", "rc:a/host"), "rc:a/host");
}

TEST(OpPathTest, SlicesOnTwoRailsMergeIntoOneHop) {
  EXPECT_EQ(MergePaths("", "rc:rxe0/host"), "rc:rxe0/host");
  EXPECT_EQ(MergePaths("rc:rxe0/host", "rc:rxe0/host"), "rc:rxe0/host");
  EXPECT_EQ(MergePaths("rc:rxe0/host", "rc:rxe1/host"), "rc:rxe0+rxe1/host");
  EXPECT_EQ(MergePaths("rc:rxe0+rxe1/host", "rc:rxe1/host"), "rc:rxe0+rxe1/host");
  // Different ways are not folded into one hop: both stay visible.
  EXPECT_EQ(MergePaths("rc:rxe0/dma-buf", "rc:rxe1/peermem"), "rc:rxe0/dma-buf | rc:rxe1/peermem");
}

TEST(OpPathTest, RequirementTermsAreCheckedWhenParsed) {
  absl::StatusOr<Requirement> r = ParseRequirement(" local , dma-buf,local");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->terms, (std::vector<std::string>{"local", "dma-buf"}));
  absl::StatusOr<Requirement> bad = ParseRequirement("rc,nvlink");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "\"nvlink\"")) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "cuda-ipc")) << bad.status();
  EXPECT_FALSE(ParseRequirement("agent,direct").ok());
  ASSERT_TRUE(ParseRequirement("").ok());
  EXPECT_TRUE(ParseRequirement("").value().empty());
}

TEST(OpPathTest, APathMeetsOrFailsEachTerm) {
  const Requirement local = *ParseRequirement("local");
  EXPECT_TRUE(CheckPath(local, "local/host", false, true).ok());
  absl::Status st = CheckPath(local, "tcp/host", false, true, "auto: local: no socket");
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(st.message(), "tcp/host")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "auto: local: no socket")) << st;

  // GPU ways bind GPU memory only.
  const Requirement dmabuf = *ParseRequirement("dma-buf");
  EXPECT_TRUE(CheckPath(dmabuf, "rc:mlx5_0/host", /*gpu=*/false, true).ok());
  EXPECT_TRUE(CheckPath(dmabuf, "rc:mlx5_0/dma-buf", true, true).ok());
  EXPECT_FALSE(CheckPath(dmabuf, "rc:mlx5_0/peermem", true, true).ok());
  EXPECT_FALSE(CheckPath(dmabuf, "tcp/staged", true, true).ok());

  // Through the agent: any hop may meet a term; the agent's own hops are known only later.
  const Requirement rc = *ParseRequirement("rc,dma-buf");
  EXPECT_TRUE(CheckPath(rc, "agent/cuda-ipc>rc:mlx5_0/dma-buf", true, true).ok());
  EXPECT_TRUE(CheckPath(rc, "agent/cuda-ipc", true, /*complete=*/false).ok());
  EXPECT_FALSE(CheckPath(rc, "agent/cuda-ipc>tcp/staged", true, true).ok());

  // agent and direct are decided by the first hop, known or not what follows.
  EXPECT_FALSE(CheckPath(*ParseRequirement("agent"), "tcp", false, true).ok());
  EXPECT_FALSE(CheckPath(*ParseRequirement("direct"), "agent/", false, false).ok());
  EXPECT_TRUE(CheckPath(*ParseRequirement("direct"), "tcp", false, true).ok());
}

}  // namespace
}  // namespace gdr
