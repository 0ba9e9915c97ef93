// The write fence a get into GPU memory needs, decided from the GPU's GPUDirect RDMA attributes
// (CUDA's WRITES_ORDERING and FLUSH_WRITES_OPTIONS). The driver calls are replaced (no GPU
// here); tests/gpu runs the real ones on the GPU host.
#include "common/cuda/gpu_direct.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace gdr::cuda {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

GpuDirectAttributes Attrs(int ordering, int flush) {
  GpuDirectAttributes a;
  a.rdma_supported = true;
  a.writes_ordering = ordering;
  a.flush_options = flush;
  a.dma_buf = true;
  return a;
}

TEST(GpuDirectTest, VisibilityFollowsTheOrderingAttribute) {
  EXPECT_EQ(VisibilityFor(Attrs(200, 0)), WriteVisibility::kInOrder);
  EXPECT_EQ(VisibilityFor(Attrs(100, kFlushOptionHost)), WriteVisibility::kInOrder);
  EXPECT_EQ(VisibilityFor(Attrs(0, kFlushOptionHost)), WriteVisibility::kFlushHost);
  EXPECT_EQ(VisibilityFor(Attrs(0, kFlushOptionHost | kFlushOptionMemOps)),
            WriteVisibility::kFlushHost);
  // Memory-op flushes need a stream the caller's work runs on; the library has none.
  EXPECT_EQ(VisibilityFor(Attrs(0, kFlushOptionMemOps)), WriteVisibility::kNoGuarantee);
  EXPECT_EQ(VisibilityFor(Attrs(0, 0)), WriteVisibility::kNoGuarantee);
}

TEST(GpuDirectTest, DescriptionNamesValuesAndEffect) {
  EXPECT_THAT(DescribeGpuDirect(Attrs(100, 3)),
              AllOf(HasSubstr("owner (100)"), HasSubstr("host+memops"),
                    HasSubstr("need no flush")));
  EXPECT_THAT(DescribeGpuDirect(Attrs(0, 1)),
              AllOf(HasSubstr("none (0)"), HasSubstr("cuFlushGPUDirectRDMAWrites")));
  EXPECT_THAT(DescribeGpuDirect(Attrs(0, 0)), HasSubstr("no flush"));
}

struct FakeCuda {
  GpuDirectAttributes attrs;
  absl::Status flush_result = absl::OkStatus();
  std::vector<int> flushed;  // ordinals flushed, in order
  std::vector<int> read;     // ordinals whose attributes were read
  GpuDirectOps ops() {
    GpuDirectOps o;
    o.attributes = [this](int ordinal) -> absl::StatusOr<GpuDirectAttributes> {
      read.push_back(ordinal);
      return attrs;
    };
    o.flush = [this](int ordinal) {
      flushed.push_back(ordinal);
      return flush_result;
    };
    return o;
  }
};

TEST(GpuDirectTest, OwnerOrderingNeedsNoFence) {
  FakeCuda cuda;
  cuda.attrs = Attrs(100, kFlushOptionHost);
  absl::StatusOr<std::function<absl::Status()>> fence = WriteFenceFor(3, cuda.ops());
  ASSERT_TRUE(fence.ok()) << fence.status();
  EXPECT_FALSE(*fence);
  EXPECT_EQ(cuda.read, std::vector<int>{3});
  EXPECT_TRUE(cuda.flushed.empty());
}

TEST(GpuDirectTest, NoOrderingFlushesTheOwningGpuEachTime) {
  FakeCuda cuda;
  cuda.attrs = Attrs(0, kFlushOptionHost);
  absl::StatusOr<std::function<absl::Status()>> fence = WriteFenceFor(1, cuda.ops());
  ASSERT_TRUE(fence.ok()) << fence.status();
  ASSERT_TRUE(*fence);
  EXPECT_TRUE(cuda.flushed.empty()) << "building the fence must not flush";
  EXPECT_TRUE((*fence)().ok());
  EXPECT_TRUE((*fence)().ok());
  EXPECT_EQ(cuda.flushed, (std::vector<int>{1, 1}));
  cuda.flush_result = absl::InternalError("cuFlushGPUDirectRDMAWrites: CUDA_ERROR_UNKNOWN");
  EXPECT_THAT((*fence)().message(), HasSubstr("cuFlushGPUDirectRDMAWrites"));
}

TEST(GpuDirectTest, NoOrderingAndNoFlushGivesNoFence) {
  FakeCuda cuda;
  cuda.attrs = Attrs(0, 0);
  absl::StatusOr<std::function<absl::Status()>> fence = WriteFenceFor(0, cuda.ops());
  ASSERT_TRUE(fence.ok()) << fence.status();
  EXPECT_FALSE(*fence);
}

TEST(GpuDirectTest, UnreadableAttributesFailTheRegistration) {
  GpuDirectOps ops;
  ops.attributes = [](int) -> absl::StatusOr<GpuDirectAttributes> {
    return absl::FailedPreconditionError("no NVIDIA driver on this host");
  };
  ops.flush = [](int) { return absl::OkStatus(); };
  absl::StatusOr<std::function<absl::Status()>> fence = WriteFenceFor(0, ops);
  EXPECT_EQ(fence.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(GpuDirectTest, RealAttributesWithoutADriverSayWhy) {
  absl::StatusOr<GpuDirectAttributes> a = ReadGpuDirectAttributes(0);
  if (a.ok()) GTEST_SKIP() << "a GPU is present: tests/gpu checks the real attributes";
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(a.status().message().empty());
}

}  // namespace
}  // namespace gdr::cuda
