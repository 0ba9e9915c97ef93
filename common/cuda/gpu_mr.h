// Registering GPU memory with an RDMA device: dma-buf first (cuMemGetHandleForAddressRange +
// ibv_reg_dmabuf_mr, the upstream kernel path), nvidia-peermem second (ibv_reg_mr on the device
// pointer, which only works when the nvidia_peermem kernel module is loaded). When both fail the
// one error says what was tried, how each failed, and which module or feature is missing.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gdr::cuda {

struct MrDeleter {
  void operator()(ibv_mr* mr) const;  // ibv_dereg_mr; a failure is logged
};
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;

enum class GpuMrMethod { kDmaBuf, kPeerMem };
const char* GpuMrMethodName(GpuMrMethod m);

struct GpuMr {
  MrPtr mr;            // lkey/rkey; iova == the device pointer
  GpuMrMethod method;
};

// The calls registration makes; tests replace them (no GPU or NIC here), production uses
// RealGpuMrOps(). Each returns nullptr / an error with errno set, like the verbs calls.
struct GpuMrOps {
  std::function<absl::StatusOr<int>(uint64_t ptr, size_t length)> dmabuf_fd;
  std::function<ibv_mr*(ibv_pd*, uint64_t offset, size_t length, uint64_t iova, int fd,
                        int access)>
      reg_dmabuf_mr;
  std::function<ibv_mr*(ibv_pd*, void* addr, size_t length, int access)> reg_mr;
  // Where /sys is (kernel modules are looked up under <sysfs_root>/module/).
  std::string sysfs_root = "/sys";
};
GpuMrOps RealGpuMrOps();

// Registers [dptr, dptr+length) of CUDA device memory on `pd` with `access` (IBV_ACCESS_*).
// The dma-buf range is widened to host pages as the driver requires; the MR's iova is dptr.
// INVALID_ARGUMENT for a null pd or zero length; FAILED_PRECONDITION when neither path works,
// with both reasons and what to install or load.
absl::StatusOr<GpuMr> RegisterGpuMemory(ibv_pd* pd, uint64_t dptr, size_t length, int access,
                                        const GpuMrOps& ops = RealGpuMrOps());

}  // namespace gdr::cuda
