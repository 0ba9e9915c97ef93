// RDMA registration of GPU memory. There is no GPU and no RDMA NIC on the CI machines, so the
// driver and verbs calls are replaced (GpuMrOps) to check the order of attempts, the dma-buf
// range arithmetic and the one error that names what is missing; the real calls are checked
// only where they can run (the no-driver answer). Registration on real hardware is not tested.
#include "common/cuda/gpu_mr.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/cuda/gpu.h"

namespace gdr::cuda {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A sysfs root with the given kernel modules "loaded".
class FakeSysfs {
 public:
  explicit FakeSysfs(std::vector<std::string> modules) {
    char tmpl[] = "/tmp/gdr_gpu_mr_test.XXXXXX";
    root_ = ::mkdtemp(tmpl);
    for (const auto& m : modules) std::filesystem::create_directories(root_ + "/module/" + m);
  }
  ~FakeSysfs() { std::filesystem::remove_all(root_); }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

struct Calls {
  int allocation = 0, dmabuf_fd = 0, reg_dmabuf = 0, reg_mr = 0;
  uint64_t fd_base = 0, fd_len = 0, offset = 0, iova = 0, length = 0;
  int fd = -1;
  std::vector<int> dmabuf_access, reg_mr_access;  // access flags of each attempt
  // The allocation the fake driver reports (the pointer's range): 2 MiB around kPtr.
  AllocationRange alloc{0x7f1200000000ull, 2u << 20};
  bool pcie_mapping = true;
  int refuse_relaxed_errno = 0;  // nonzero: a verbs call with relaxed ordering fails so
};

ibv_mr* FakeMr() {
  static ibv_mr mr{};
  return &mr;
}

GpuMrOps Ops(Calls* c, const std::string& sysfs, absl::Status fd_status, int dmabuf_errno,
             int reg_errno) {
  GpuMrOps ops;
  ops.sysfs_root = sysfs;
  ops.allocation = [=](uint64_t) -> absl::StatusOr<AllocationRange> {
    ++c->allocation;
    return c->alloc;
  };
  ops.dmabuf_fd = [=](uint64_t base, size_t len) -> absl::StatusOr<DmaBuf> {
    ++c->dmabuf_fd;
    c->fd_base = base;
    c->fd_len = len;
    if (!fd_status.ok()) return fd_status;
    return DmaBuf{::eventfd(0, EFD_CLOEXEC), c->pcie_mapping};  // any real fd: it gets closed
  };
  ops.reg_dmabuf_mr = [=](ibv_pd*, uint64_t offset, size_t length, uint64_t iova, int fd,
                          int access) -> ibv_mr* {
    ++c->reg_dmabuf;
    c->dmabuf_access.push_back(access);
    c->offset = offset;
    c->length = length;
    c->iova = iova;
    c->fd = fd;
    if (c->refuse_relaxed_errno != 0 && (access & IBV_ACCESS_RELAXED_ORDERING)) {
      errno = c->refuse_relaxed_errno;
      return nullptr;
    }
    if (dmabuf_errno != 0) {
      errno = dmabuf_errno;
      return nullptr;
    }
    return FakeMr();
  };
  ops.reg_mr = [=](ibv_pd*, void*, size_t, int access) -> ibv_mr* {
    ++c->reg_mr;
    c->reg_mr_access.push_back(access);
    if (reg_errno != 0) {
      errno = reg_errno;
      return nullptr;
    }
    return FakeMr();
  };
  return ops;
}

constexpr uint64_t kPtr = 0x7f1200000000ull + 0x1010;  // not page aligned on purpose

TEST(RegisterGpuMemory, DmaBufExportsTheWholeAllocation) {
  FakeSysfs sys({"nvidia"});
  Calls c;
  ibv_pd pd{};
  absl::StatusOr<GpuMr> r =
      RegisterGpuMemory(&pd, kPtr, 8192, IBV_ACCESS_LOCAL_WRITE,
                        Ops(&c, sys.root(), absl::OkStatus(), 0, 0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->method, GpuMrMethod::kDmaBuf);
  EXPECT_EQ(c.reg_mr, 0);
  // The export names the allocation, not the pages around the range: a neighbour in the same
  // page is never exported.
  EXPECT_EQ(c.fd_base, c.alloc.base);
  EXPECT_EQ(c.fd_len, c.alloc.size);
  EXPECT_EQ(c.offset, kPtr - c.alloc.base);
  EXPECT_EQ(c.iova, kPtr);  // descriptors name the device address
  EXPECT_EQ(c.length, 8192u);
  EXPECT_TRUE(r->pcie_mapping);
  // The fd was closed after registration (the MR keeps the dma-buf alive).
  EXPECT_EQ(::fcntl(c.fd, F_GETFD), -1);
  r->mr.release();  // a fake: not for ibv_dereg_mr
}

TEST(RegisterGpuMemory, AsksForRelaxedOrdering) {
  FakeSysfs sys({"nvidia"});
  Calls c;
  ibv_pd pd{};
  GpuMrOps ops = Ops(&c, sys.root(), absl::OkStatus(), 0, 0);
  ops.relaxed_ordering = true;
  absl::StatusOr<GpuMr> r = RegisterGpuMemory(&pd, kPtr, 4096, IBV_ACCESS_REMOTE_WRITE, ops);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(c.dmabuf_access.size(), 1u);
  EXPECT_EQ(c.dmabuf_access[0], IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
  EXPECT_TRUE(r->relaxed_ordering.requested);
  EXPECT_TRUE(r->relaxed_ordering.accepted);
  r->mr.release();
}

TEST(RegisterGpuMemory, RelaxedOrderingRefusedIsRetriedWithout) {
  FakeSysfs sys({"nvidia"});
  Calls c;
  c.refuse_relaxed_errno = EINVAL;  // a kernel older than the optional access flags
  ibv_pd pd{};
  GpuMrOps ops = Ops(&c, sys.root(), absl::OkStatus(), 0, 0);
  ops.relaxed_ordering = true;
  absl::StatusOr<GpuMr> r = RegisterGpuMemory(&pd, kPtr, 4096, IBV_ACCESS_REMOTE_WRITE, ops);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->method, GpuMrMethod::kDmaBuf);
  EXPECT_EQ(c.dmabuf_access, (std::vector<int>{
                                 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING,
                                 IBV_ACCESS_REMOTE_WRITE}));
  EXPECT_FALSE(r->relaxed_ordering.accepted);
  EXPECT_THAT(r->relaxed_ordering.detail, HasSubstr("refused"));
  r->mr.release();
}

TEST(RegisterGpuMemory, AllocationOffPageBoundariesIsNotExported) {
  FakeSysfs sys({"nvidia", "nvidia_peermem"});
  Calls c;
  c.alloc = {kPtr - 0x8, 8192};  // a small cuMemAlloc inside a page shared with others
  ibv_pd pd{};
  absl::StatusOr<GpuMr> r = RegisterGpuMemory(&pd, kPtr, 4096, IBV_ACCESS_LOCAL_WRITE,
                                              Ops(&c, sys.root(), absl::OkStatus(), 0, EFAULT));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(c.dmabuf_fd, 0);  // never exported: it would have covered a neighbour
  EXPECT_EQ(c.reg_mr, 1);
  EXPECT_THAT(std::string(r.status().message()),
              AllOf(HasSubstr("does not start and end on host pages"),
                    HasSubstr("allocate at least 2 MiB")));
}

TEST(DmaBufRangeFor, WholeAllocationAndItsLimits) {
  constexpr uint64_t kPage = 4096;
  const AllocationRange alloc{0x10000000, 2u << 20};
  absl::StatusOr<DmaBufRange> r = DmaBufRangeFor(0x10000000 + 0x1234, 100, alloc, kPage);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->base, alloc.base);
  EXPECT_EQ(r->size, alloc.size);
  EXPECT_EQ(r->offset, 0x1234u);
  // The last byte of the allocation is inside; one more is not.
  EXPECT_TRUE(DmaBufRangeFor(alloc.base + alloc.size - 1, 1, alloc, kPage).ok());
  EXPECT_FALSE(DmaBufRangeFor(alloc.base + alloc.size - 1, 2, alloc, kPage).ok());
  EXPECT_FALSE(DmaBufRangeFor(alloc.base - 1, 2, alloc, kPage).ok());
  EXPECT_FALSE(DmaBufRangeFor(alloc.base, 1, AllocationRange{alloc.base, 8000}, kPage).ok());
}

TEST(RegisterGpuMemory, FallsBackToPeerMem) {
  FakeSysfs sys({"nvidia", "nvidia_peermem"});
  Calls c;
  ibv_pd pd{};
  absl::StatusOr<GpuMr> r = RegisterGpuMemory(
      &pd, kPtr, 4096, IBV_ACCESS_LOCAL_WRITE,
      Ops(&c, sys.root(), absl::OkStatus(), /*dmabuf_errno=*/EOPNOTSUPP, /*reg_errno=*/0));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->method, GpuMrMethod::kPeerMem);
  EXPECT_EQ(c.reg_dmabuf, 2);  // with relaxed ordering, then without it
  EXPECT_EQ(c.reg_mr, 1);
  r->mr.release();
}

TEST(RegisterGpuMemory, BothFailNamesMissingModuleAndFeature) {
  FakeSysfs sys({"nvidia"});
  Calls c;
  ibv_pd pd{};
  absl::StatusOr<GpuMr> r = RegisterGpuMemory(
      &pd, kPtr, 4096, IBV_ACCESS_LOCAL_WRITE,
      Ops(&c, sys.root(), absl::OkStatus(), EOPNOTSUPP, EFAULT));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()),
              AllOf(HasSubstr("Tried dma-buf: ibv_reg_dmabuf_mr failed"),
                    HasSubstr("lacks dma-buf memory regions"),
                    HasSubstr("Tried nvidia-peermem: ibv_reg_mr on the device pointer failed: "
                              "Bad address"),
                    HasSubstr("nvidia_peermem is not loaded"),
                    HasSubstr("not on a stock distribution kernel")));
}

TEST(RegisterGpuMemory, DriverCannotExportDmaBuf) {
  FakeSysfs sys({});
  Calls c;
  ibv_pd pd{};
  absl::StatusOr<GpuMr> r = RegisterGpuMemory(
      &pd, kPtr, 4096, IBV_ACCESS_LOCAL_WRITE,
      Ops(&c, sys.root(),
          absl::InternalError("cuMemGetHandleForAddressRange(...): CUDA_ERROR_NOT_SUPPORTED"), 0,
          EINVAL));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c.reg_dmabuf, 0);  // no fd, no import attempt
  EXPECT_EQ(c.reg_mr, 2);      // EINVAL: tried again without relaxed ordering
  EXPECT_THAT(std::string(r.status().message()),
              AllOf(HasSubstr("cuMemGetHandleForAddressRange(DMA_BUF_FD) failed"),
                    HasSubstr("cannot export dma-buf"), HasSubstr("nvidia_peermem is not loaded"),
                    HasSubstr("the nvidia kernel module itself is not loaded")));
}

TEST(RegisterGpuMemory, PeerMemLoadedButRefused) {
  FakeSysfs sys({"nvidia", "nvidia_peermem"});
  Calls c;
  ibv_pd pd{};
  absl::StatusOr<GpuMr> r = RegisterGpuMemory(
      &pd, kPtr, 4096, 0, Ops(&c, sys.root(), absl::OkStatus(), ENOSYS, EINVAL));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("nvidia_peermem is loaded but refused the range"));
}

TEST(RegisterGpuMemory, BadArguments) {
  Calls c;
  ibv_pd pd{};
  EXPECT_EQ(RegisterGpuMemory(nullptr, kPtr, 4096, 0, Ops(&c, "/", absl::OkStatus(), 0, 0))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      RegisterGpuMemory(&pd, kPtr, 0, 0, Ops(&c, "/", absl::OkStatus(), 0, 0)).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.dmabuf_fd, 0);
}

// The real dma-buf export on a host without a GPU driver: the reason reaches the caller.
TEST(RegisterGpuMemory, RealDriverAbsent) {
  if (DriverStatus().ok()) GTEST_SKIP() << "an NVIDIA driver is present; covered on GPU hosts";
  absl::StatusOr<DmaBuf> fd = DmaBufFd(0x7f0000000000ull, 4096);
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kFailedPrecondition);
  if (BuiltWithCuda()) {
    EXPECT_THAT(std::string(fd.status().message()), HasSubstr("libcuda.so.1"));
  }
}

}  // namespace
}  // namespace gdr::cuda
