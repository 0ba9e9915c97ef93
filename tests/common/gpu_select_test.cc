// Naming a GPU by PCI address (full or short) or CUDA ordinal, against a list of GPUs: the rules
// need no driver.
#include "common/cuda/gpu_select.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gdr::cuda {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::vector<GpuInfo> TwoGpus() {
  return {GpuInfo{0, "0000:18:00.0", "NVIDIA H100 80GB HBM3", 80ull << 30, true},
          GpuInfo{1, "0001:b7:00.0", "NVIDIA H100 80GB HBM3", 80ull << 30, true}};
}

TEST(CanonicalPciAddress, FullShortAndCase) {
  EXPECT_EQ(*CanonicalPciAddress("0000:b7:00.0"), "0000:b7:00.0");
  EXPECT_EQ(*CanonicalPciAddress("b7:00.0"), "0000:b7:00.0");
  EXPECT_EQ(*CanonicalPciAddress("0000:B7:1F.7"), "0000:b7:1f.7");
  EXPECT_EQ(*CanonicalPciAddress("1:3:4.1"), "0001:03:04.1");
  // cuDeviceGetPCIBusId prints 8-digit domains on some drivers.
  EXPECT_EQ(*CanonicalPciAddress("00000000:18:00.0"), "0000:18:00.0");
}

TEST(CanonicalPciAddress, RejectsMalformed) {
  for (const char* bad : {"b7:00", "b7", "0000:b7:00:0", "zz:00.0", "b7:20.0", "b7:00.8",
                          "100:00.0", "0000:b7:00.", ":00.0", ""}) {
    absl::StatusOr<std::string> r = CanonicalPciAddress(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(ResolveGpu, ByFullShortAndOrdinal) {
  const auto gpus = TwoGpus();
  EXPECT_EQ(ResolveGpu("0000:18:00.0", gpus)->ordinal, 0);
  EXPECT_EQ(ResolveGpu("18:00.0", gpus)->ordinal, 0);
  EXPECT_EQ(ResolveGpu("0001:B7:00.0", gpus)->ordinal, 1);
  EXPECT_EQ(ResolveGpu("1", gpus)->pci, "0001:b7:00.0");
  EXPECT_EQ(ResolveGpu(" 0 ", gpus)->pci, "0000:18:00.0");
}

TEST(ResolveGpu, ShortFormMeansDomainZero) {
  // The seed matched bus/device only: b7:00.0 must not pick the GPU in domain 1.
  absl::StatusOr<GpuInfo> r = ResolveGpu("b7:00.0", TwoGpus());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

TEST(ResolveGpu, FunctionNumberMatters) {
  absl::StatusOr<GpuInfo> r = ResolveGpu("18:00.1", TwoGpus());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

TEST(ResolveGpu, NotFoundListsGpusPresent) {
  absl::StatusOr<GpuInfo> r = ResolveGpu("0000:3b:00.0", TwoGpus());
  ASSERT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()),
              AllOf(HasSubstr("no GPU at PCI address 0000:3b:00.0"),
                    HasSubstr("0 0000:18:00.0 NVIDIA H100"), HasSubstr("1 0001:b7:00.0")));
  r = ResolveGpu("7", TwoGpus());
  ASSERT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()),
              AllOf(HasSubstr("no GPU with CUDA ordinal 7"), HasSubstr("0 0000:18:00.0")));
}

TEST(ResolveGpu, MalformedSpec) {
  for (const char* bad : {"-1", "gpu0", "0x1", "b7:00", ""}) {
    EXPECT_EQ(ResolveGpu(bad, TwoGpus()).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_FALSE(ValidateGpuSpec(bad).ok()) << bad;
  }
  EXPECT_TRUE(ValidateGpuSpec("3").ok());
  EXPECT_TRUE(ValidateGpuSpec("b7:00.0").ok());
}

}  // namespace
}  // namespace gdr::cuda
