#include "common/cuda/gpu_mr.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cuda/gpu.h"
#include "common/base/log.h"

namespace gdr::cuda {

void MrDeleter::operator()(ibv_mr* mr) const {
  if (mr == nullptr) return;
  if (int rc = ::ibv_dereg_mr(mr); rc != 0) {
    GDR_LOG(kError) << "ibv_dereg_mr of a GPU memory region failed: " << std::strerror(rc);
  }
}

const char* GpuMrMethodName(GpuMrMethod m) {
  switch (m) {
    case GpuMrMethod::kDmaBuf: return "dma-buf";
    case GpuMrMethod::kPeerMem: return "nvidia-peermem";
  }
  return "?";
}

GpuMrOps RealGpuMrOps() {
  GpuMrOps ops;
  ops.allocation = [](uint64_t ptr) { return AllocationOf(ptr); };
  ops.dmabuf_fd = [](uint64_t ptr, size_t length) { return DmaBufFd(ptr, length); };
  ops.reg_dmabuf_mr = [](ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                         int access) {
    return ::ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, access);
  };
  ops.reg_mr = [](ibv_pd* pd, void* addr, size_t length, int access) {
    return ::ibv_reg_mr(pd, addr, length, access);
  };
  ops.relaxed_ordering = verbs::RelaxedOrderingWanted();
  return ops;
}

namespace {

bool ModuleLoaded(const std::string& sysfs_root, const char* name) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(sysfs_root) / "module" / name, ec);
}

std::string DeviceName(ibv_pd* pd) {
  if (pd->context && pd->context->device) return ::ibv_get_device_name(pd->context->device);
  return "the RDMA device";
}

}  // namespace

absl::StatusOr<DmaBufRange> DmaBufRangeFor(uint64_t ptr, size_t length, AllocationRange alloc,
                                           uint64_t page) {
  if (ptr < alloc.base || length > alloc.size || ptr - alloc.base > alloc.size - length) {
    return absl::FailedPreconditionError(absl::StrCat(
        "[0x", absl::Hex(ptr), ", +", length, ") is not inside its allocation [0x",
        absl::Hex(alloc.base), ", +", alloc.size, ")"));
  }
  if (alloc.base % page != 0 || alloc.size % page != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "its allocation [0x", absl::Hex(alloc.base), ", +", alloc.size,
        ") does not start and end on host pages (a small cuMemAlloc that shares a page with "
        "others; exporting the page would expose a neighbour): allocate at least 2 MiB"));
  }
  return DmaBufRange{alloc.base, alloc.size, ptr - alloc.base};
}

absl::StatusOr<GpuMr> RegisterGpuMemory(ibv_pd* pd, uint64_t dptr, size_t length, int access,
                                        const GpuMrOps& ops) {
  if (pd == nullptr) return absl::InvalidArgumentError("RegisterGpuMemory: no protection domain");
  if (length == 0) return absl::InvalidArgumentError("RegisterGpuMemory: zero length");
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  verbs::RelaxedOrdering ro;

  // 1. dma-buf: the GPU driver exports the whole allocation, the RDMA driver imports the range.
  std::string dmabuf_why;
  absl::StatusOr<DmaBufRange> range = [&]() -> absl::StatusOr<DmaBufRange> {
    absl::StatusOr<AllocationRange> alloc = ops.allocation(dptr);
    if (!alloc.ok()) return alloc.status();
    return DmaBufRangeFor(dptr, length, *alloc, page);
  }();
  if (!range.ok()) {
    dmabuf_why = absl::StrCat("not exported: ", range.status().message());
  } else if (absl::StatusOr<DmaBuf> buf = ops.dmabuf_fd(range->base, range->size); !buf.ok()) {
    dmabuf_why = absl::StrCat("cuMemGetHandleForAddressRange(DMA_BUF_FD) failed: ",
                              buf.status().message());
    if (absl::StrContains(buf.status().message(), "NOT_SUPPORTED")) {
      absl::StrAppend(&dmabuf_why,
                      " (the GPU driver cannot export dma-buf: it needs the open-source NVIDIA "
                      "kernel module, driver >= 515, on a kernel >= 5.12)");
    }
  } else {
    ibv_mr* mr = verbs::RegisterPreferringRelaxedOrdering(
        [&](int a) { return ops.reg_dmabuf_mr(pd, range->offset, length, dptr, buf->fd, a); },
        access, ops.relaxed_ordering, &ro);
    const int err = errno;
    ::close(buf->fd);  // the MR holds its own reference to the dma-buf
    if (mr != nullptr) {
      return GpuMr{MrPtr(mr), GpuMrMethod::kDmaBuf, std::move(ro), buf->pcie_mapping, ""};
    }
    dmabuf_why = absl::StrCat("ibv_reg_dmabuf_mr failed: ", std::strerror(err ? err : EINVAL));
    if (err == EOPNOTSUPP || err == ENOSYS || err == EPROTONOSUPPORT) {
      absl::StrAppend(&dmabuf_why, " (", DeviceName(pd),
                      "'s kernel driver or rdma-core lacks dma-buf memory regions: kernel >= 5.12 "
                      "and rdma-core >= 34 are needed)");
    }
  }

  // 2. nvidia-peermem: the RDMA core asks the peer-memory client to pin the device pages.
  ibv_mr* mr = verbs::RegisterPreferringRelaxedOrdering(
      [&](int a) { return ops.reg_mr(pd, reinterpret_cast<void*>(dptr), length, a); }, access,
      ops.relaxed_ordering, &ro);
  const int err = errno;
  if (mr != nullptr) {
    GDR_LOG(kInfo) << "GPU memory registered through nvidia-peermem (dma-buf unavailable: "
                   << dmabuf_why << ")";
    return GpuMr{MrPtr(mr), GpuMrMethod::kPeerMem, std::move(ro), false, dmabuf_why};
  }
  std::string peermem_why = absl::StrCat("ibv_reg_mr on the device pointer failed: ",
                                         std::strerror(err ? err : EINVAL));
  if (!ModuleLoaded(ops.sysfs_root, "nvidia_peermem")) {
    // Loading it is no cure everywhere: the module needs the kernel's peer-memory hooks, which
    // MOFED's RDMA stack carries and stock distribution kernels do not.
    absl::StrAppend(&peermem_why,
                    " (kernel module nvidia_peermem is not loaded; `modprobe nvidia-peermem` "
                    "works only on a kernel with peer-memory support, such as MLNX_OFED's, not "
                    "on a stock distribution kernel)");
  } else {
    absl::StrAppend(&peermem_why, " (nvidia_peermem is loaded but refused the range)");
  }
  std::string hint;
  if (!ModuleLoaded(ops.sysfs_root, "nvidia")) {
    hint = "; the nvidia kernel module itself is not loaded";
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot register GPU memory 0x", absl::Hex(dptr), " +", length, " on ", DeviceName(pd),
      " for RDMA. Tried dma-buf: ", dmabuf_why, ". Tried nvidia-peermem: ", peermem_why, hint,
      ". Use dma-buf (the open NVIDIA kernel module, driver >= 515, kernel >= 5.12, rdma-core "
      ">= 34), or nvidia-peermem on a MLNX_OFED kernel."));
}

}  // namespace gdr::cuda
