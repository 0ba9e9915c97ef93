// Device memory and the staging pipe on a real GPU. Without one (no driver, or a build without
// CUDA) each test is skipped with the reason, except the checks of that very answer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <functional>
#include <iostream>
#include <vector>

#include "common/cuda/gpu.h"
#include "common/cuda/gpu_direct.h"
#include "common/cuda/staging_pipe.h"
#include "common/base/pattern.h"

namespace gdr::cuda {
namespace {

using ::testing::HasSubstr;

#define REQUIRE_GPU()                                                  \
  do {                                                                 \
    absl::StatusOr<std::vector<GpuInfo>> gpus_ = ListGpus();           \
    if (!gpus_.ok()) GTEST_SKIP() << "no GPU: " << gpus_.status();     \
  } while (0)

TEST(GpuMemory, NoDriverAnswersWhy) {
  if (DriverStatus().ok()) GTEST_SKIP() << "an NVIDIA driver is present";
  absl::StatusOr<std::unique_ptr<DeviceMemory>> m = DeviceMemory::Create(0, 4096);
  ASSERT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<GpuInfo> g = FindGpu("0000:b7:00.0");
  ASSERT_EQ(g.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(g.status().message()),
              HasSubstr(BuiltWithCuda() ? "libcuda.so.1" : "no GPU support"));
  // A malformed name is reported as such, driver or not.
  EXPECT_EQ(FindGpu("b7:00").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GpuMemory, ListAndFindByEveryForm) {
  REQUIRE_GPU();
  std::vector<GpuInfo> gpus = *ListGpus();
  for (const GpuInfo& g : gpus) {
    EXPECT_EQ(FindGpu(g.pci)->ordinal, g.ordinal);
    EXPECT_EQ(FindGpu(std::to_string(g.ordinal))->pci, g.pci);
    if (g.pci.rfind("0000:", 0) == 0) {
      EXPECT_EQ(FindGpu(g.pci.substr(5))->ordinal, g.ordinal);
    }
  }
  absl::StatusOr<GpuInfo> none = FindGpu("0000:ff:1f.7");
  ASSERT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr(gpus[0].pci));
}

TEST(GpuMemory, CopyRoundTripAndBounds) {
  REQUIRE_GPU();
  auto m = DeviceMemory::Create(0, 1 << 20);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::byte> in(1 << 20), out(1 << 20);
  PatternFill(PatternSeed("gpu"), 0, in);
  ASSERT_TRUE((*m)->CopyFromHost(0, in.data(), in.size()).ok());
  ASSERT_TRUE((*m)->CopyToHost(0, out.data(), out.size()).ok());
  EXPECT_EQ(std::memcmp(in.data(), out.data(), in.size()), 0);
  EXPECT_EQ((*m)->CopyToHost(1, out.data(), 1 << 20).code(), absl::StatusCode::kOutOfRange);
  // The allocation reports its GPU.
  EXPECT_EQ(*PointerOrdinal((*m)->ptr()), 0);
}

// Library allocations are whole 2 MiB granules, so their dma-buf export (the whole
// allocation) never names a neighbour's memory; the export itself works on this GPU.
TEST(GpuMemory, SmallAllocationIsAWholeGranuleAndExportsAsDmaBuf) {
  REQUIRE_GPU();
  auto m = DeviceMemory::Create(0, 1000);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->size(), 1000u);  // what the caller asked for
  absl::StatusOr<AllocationRange> alloc = AllocationOf((*m)->ptr());
  ASSERT_TRUE(alloc.ok()) << alloc.status();
  EXPECT_EQ(alloc->base, (*m)->ptr());
  EXPECT_EQ(alloc->size, kGpuAllocationGranule);
  EXPECT_EQ(alloc->base % 4096, 0u);
  if (!ListGpus()->at(0).dma_buf) GTEST_SKIP() << "GPU 0 does not report dma-buf support";
  absl::StatusOr<DmaBuf> buf = DmaBufFd(alloc->base, alloc->size);
  ASSERT_TRUE(buf.ok()) << buf.status();
  EXPECT_GE(buf->fd, 0);
  std::cout << "dma-buf export of a 2 MiB allocation: fd " << buf->fd << ", mapping "
            << (buf->pcie_mapping ? "PCIe (CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE)"
                                  : "default")
            << "\n";
  ::close(buf->fd);
}

// The attributes that decide a get's write fence, read from the driver, and the fence they
// give run for real (a flush where the GPU needs one).
TEST(GpuDirect, AttributesAreReadAndTheirFenceRuns) {
  REQUIRE_GPU();
  const std::vector<GpuInfo> gpus = *ListGpus();
  for (const GpuInfo& g : gpus) {
    absl::StatusOr<GpuDirectAttributes> a = ReadGpuDirectAttributes(g.ordinal);
    ASSERT_TRUE(a.ok()) << a.status();
    std::cout << "GPU " << g.ordinal << " " << g.pci << " " << g.name << ": "
              << DescribeGpuDirect(*a) << "\n";
    EXPECT_EQ(a->dma_buf, g.dma_buf);
    absl::StatusOr<std::function<absl::Status()>> fence =
        WriteFenceFor(g.ordinal, RealGpuDirectOps());
    ASSERT_TRUE(fence.ok()) << fence.status();
    EXPECT_EQ(static_cast<bool>(*fence), VisibilityFor(*a) == WriteVisibility::kFlushHost);
    if (*fence) {
      EXPECT_TRUE((*fence)().ok());
    }
    if (a->flush_options & kFlushOptionHost) {
      absl::Status flushed = FlushGpuDirectWrites(g.ordinal);
      EXPECT_TRUE(flushed.ok()) << flushed;
    }
  }
}

TEST(StagingPipe, ToAndFromDeviceInPieces) {
  REQUIRE_GPU();
  const size_t n = (3 << 20) + 12345;  // several slots and a ragged tail
  auto m = DeviceMemory::Create(0, n);
  ASSERT_TRUE(m.ok()) << m.status();
  auto pipe = StagingPipe::Create(0, 256 << 10, 3);
  ASSERT_TRUE(pipe.ok()) << pipe.status();
  std::vector<std::byte> src(n), back(n);
  PatternFill(PatternSeed("pipe", 1), 0, src);
  size_t fed = 0;
  StagingPipe::Result r = (*pipe)->ToDevice((*m)->ptr(), n, [&](std::byte* dst, size_t k) {
    std::memcpy(dst, src.data() + fed, k);
    fed += k;
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.io.ok() && r.gpu.ok()) << r.io << r.gpu;
  ASSERT_TRUE((*pipe)->Sync().ok());
  EXPECT_EQ(fed, n);
  ASSERT_TRUE((*m)->CopyToHost(0, back.data(), n).ok());
  EXPECT_EQ(std::memcmp(src.data(), back.data(), n), 0);

  std::vector<std::byte> drained;
  bool header = false;
  r = (*pipe)->FromDevice(
      (*m)->ptr(), n,
      [&] {
        header = drained.empty();
        return absl::OkStatus();
      },
      [&](const std::byte* p, size_t k) {
        drained.insert(drained.end(), p, p + k);
        return absl::OkStatus();
      });
  ASSERT_TRUE(r.io.ok() && r.gpu.ok()) << r.io << r.gpu;
  EXPECT_TRUE(header && r.sent_any);
  ASSERT_EQ(drained.size(), n);
  EXPECT_EQ(std::memcmp(src.data(), drained.data(), n), 0);
  EXPECT_EQ((*pipe)->stats().bytes_to_device, n);
  EXPECT_EQ((*pipe)->stats().bytes_from_device, n);
  EXPECT_GT((*pipe)->stats().copy_ns, 0u);
}

TEST(StagingPipe, StreamFailureStopsAndReports) {
  REQUIRE_GPU();
  auto m = DeviceMemory::Create(0, 1 << 20);
  ASSERT_TRUE(m.ok());
  auto pipe = StagingPipe::Create(0, 64 << 10, 2);
  ASSERT_TRUE(pipe.ok());
  int calls = 0;
  StagingPipe::Result r = (*pipe)->ToDevice((*m)->ptr(), 1 << 20, [&](std::byte*, size_t) {
    return ++calls == 3 ? absl::UnavailableError("peer closed") : absl::OkStatus();
  });
  EXPECT_EQ(r.io.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(calls, 3);
  EXPECT_TRUE((*pipe)->Sync().ok());
}

TEST(StagingPipe, BadDevicePointerIsAGpuErrorAndTheStreamIsStillConsumed) {
  REQUIRE_GPU();
  auto pipe = StagingPipe::Create(0, 64 << 10, 2);
  ASSERT_TRUE(pipe.ok());
  size_t fed = 0;
  // An address no allocation covers: the driver refuses the copy (checked synchronously).
  StagingPipe::Result r =
      (*pipe)->ToDevice(0x10, 256 << 10, [&](std::byte*, size_t k) {
        fed += k;
        return absl::OkStatus();
      });
  EXPECT_TRUE(r.io.ok());
  // The refusal shows in the transfer's result or, for a copy the pipe still held, in Sync().
  const absl::Status synced = (*pipe)->Sync();
  EXPECT_FALSE(r.gpu.ok() && synced.ok()) << "a copy to 0x10 went unreported";
  EXPECT_EQ(fed, size_t{256 << 10});
}

// Writes of one slot each, as a link's 1 MiB chunks come: the pipe holds the newest slots'
// copies back (half its ring), so what Sync() returns after must be every byte of every write,
// and a read after writes (FromDevice syncs first) must see them.
TEST(StagingPipe, HeldCopiesLandBySyncAndBeforeARead) {
  REQUIRE_GPU();
  constexpr size_t kSlot = 64 << 10;
  constexpr int kWrites = 11;  // not a multiple of the ring
  auto m = DeviceMemory::Create(0, kSlot * kWrites);
  ASSERT_TRUE(m.ok()) << m.status();
  auto pipe = StagingPipe::Create(0, kSlot, 4);
  ASSERT_TRUE(pipe.ok()) << pipe.status();
  std::vector<std::byte> src(kSlot * kWrites);
  PatternFill(PatternSeed("held", 2), 0, src);
  for (int w = 0; w < kWrites; ++w) {
    StagingPipe::Result r =
        (*pipe)->ToDevice((*m)->ptr() + w * kSlot, kSlot, [&](std::byte* dst, size_t k) {
          std::memcpy(dst, src.data() + w * kSlot, k);
          return absl::OkStatus();
        });
    ASSERT_TRUE(r.io.ok() && r.gpu.ok()) << r.io << r.gpu;
    if (w == 0) {
      EXPECT_TRUE((*pipe)->busy()) << "a held write must count as busy";
    }
  }
  std::vector<std::byte> drained;
  StagingPipe::Result r = (*pipe)->FromDevice(
      (*m)->ptr(), src.size(), [] { return absl::OkStatus(); },
      [&](const std::byte* p, size_t k) {
        drained.insert(drained.end(), p, p + k);
        return absl::OkStatus();
      });
  ASSERT_TRUE(r.io.ok() && r.gpu.ok()) << r.io << r.gpu;
  ASSERT_EQ(drained.size(), src.size());
  EXPECT_EQ(std::memcmp(src.data(), drained.data(), src.size()), 0);
  EXPECT_EQ((*pipe)->stats().bytes_to_device, src.size());
  ASSERT_TRUE((*pipe)->Sync().ok());
  EXPECT_FALSE((*pipe)->busy());
}

}  // namespace
}  // namespace gdr::cuda
