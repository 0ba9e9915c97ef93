#include "common/cuda/gpu_mr.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cuda/gpu.h"
#include "common/log.h"

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
  ops.dmabuf_fd = [](uint64_t ptr, size_t length) { return DmaBufFd(ptr, length); };
  ops.reg_dmabuf_mr = [](ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                         int access) {
    return ::ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, access);
  };
  ops.reg_mr = [](ibv_pd* pd, void* addr, size_t length, int access) {
    return ::ibv_reg_mr(pd, addr, length, access);
  };
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

absl::StatusOr<GpuMr> RegisterGpuMemory(ibv_pd* pd, uint64_t dptr, size_t length, int access,
                                        const GpuMrOps& ops) {
  if (pd == nullptr) return absl::InvalidArgumentError("RegisterGpuMemory: no protection domain");
  if (length == 0) return absl::InvalidArgumentError("RegisterGpuMemory: zero length");
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t base = dptr & ~(page - 1);
  const uint64_t span = ((dptr + length + page - 1) & ~(page - 1)) - base;

  // 1. dma-buf: the GPU driver exports the range, the RDMA driver imports it.
  std::string dmabuf_why;
  absl::StatusOr<int> fd = ops.dmabuf_fd(base, span);
  if (!fd.ok()) {
    dmabuf_why = absl::StrCat("cuMemGetHandleForAddressRange(DMA_BUF_FD) failed: ",
                              fd.status().message());
    if (absl::StrContains(fd.status().message(), "NOT_SUPPORTED")) {
      absl::StrAppend(&dmabuf_why,
                      " (the GPU driver cannot export dma-buf: it needs the open-source NVIDIA "
                      "kernel module, driver >= 515, on a kernel >= 5.12)");
    }
  } else {
    errno = 0;
    ibv_mr* mr = ops.reg_dmabuf_mr(pd, dptr - base, length, dptr, *fd, access);
    const int err = errno;
    ::close(*fd);  // the MR holds its own reference to the dma-buf
    if (mr != nullptr) return GpuMr{MrPtr(mr), GpuMrMethod::kDmaBuf};
    dmabuf_why = absl::StrCat("ibv_reg_dmabuf_mr failed: ", std::strerror(err ? err : EINVAL));
    if (err == EOPNOTSUPP || err == ENOSYS || err == EPROTONOSUPPORT) {
      absl::StrAppend(&dmabuf_why, " (", DeviceName(pd),
                      "'s kernel driver or rdma-core lacks dma-buf memory regions: kernel >= 5.12 "
                      "and rdma-core >= 34 are needed)");
    }
  }

  // 2. nvidia-peermem: the RDMA core asks the peer-memory client to pin the device pages.
  errno = 0;
  ibv_mr* mr = ops.reg_mr(pd, reinterpret_cast<void*>(dptr), length, access);
  const int err = errno;
  if (mr != nullptr) {
    GDR_LOG(kInfo) << "GPU memory registered through nvidia-peermem (dma-buf unavailable: "
                   << dmabuf_why << ")";
    return GpuMr{MrPtr(mr), GpuMrMethod::kPeerMem};
  }
  std::string peermem_why = absl::StrCat("ibv_reg_mr on the device pointer failed: ",
                                         std::strerror(err ? err : EINVAL));
  if (!ModuleLoaded(ops.sysfs_root, "nvidia_peermem")) {
    absl::StrAppend(&peermem_why,
                    " (kernel module nvidia_peermem is not loaded: `modprobe nvidia-peermem`)");
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
      ". Load nvidia-peermem, or use the open NVIDIA kernel module with dma-buf support."));
}

}  // namespace gdr::cuda
