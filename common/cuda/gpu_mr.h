// Registering GPU memory with an RDMA device: dma-buf first (cuMemGetHandleForAddressRange +
// ibv_reg_dmabuf_mr, the upstream kernel path), nvidia-peermem second (ibv_reg_mr on the device
// pointer, which only works on a kernel with peer-memory support and nvidia_peermem loaded).
// When both fail the one error says what was tried, how each failed, and what is missing.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/cuda/gpu.h"
#include "common/verbs/relaxed_ordering.h"

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
  verbs::RelaxedOrdering relaxed_ordering;
  bool pcie_mapping = false;  // dma-buf exported with the PCIe (BAR1) mapping type
  std::string dmabuf_unavailable;  // kPeerMem: why dma-buf was not used
};

// The calls registration makes; tests replace them (no GPU or NIC here), production uses
// RealGpuMrOps(). The verbs calls return nullptr with errno set, like the verbs calls.
struct GpuMrOps {
  std::function<absl::StatusOr<AllocationRange>(uint64_t ptr)> allocation;
  std::function<absl::StatusOr<DmaBuf>(uint64_t base, size_t length)> dmabuf_fd;
  std::function<ibv_mr*(ibv_pd*, uint64_t offset, size_t length, uint64_t iova, int fd,
                        int access)>
      reg_dmabuf_mr;
  std::function<ibv_mr*(ibv_pd*, void* addr, size_t length, int access)> reg_mr;
  // Where /sys is (kernel modules are looked up under <sysfs_root>/module/).
  std::string sysfs_root = "/sys";
  bool relaxed_ordering = true;  // ask for IBV_ACCESS_RELAXED_ORDERING (relaxed_ordering.h)
};
GpuMrOps RealGpuMrOps();

// The dma-buf export for [ptr, ptr+length) inside allocation `alloc`: the whole allocation, so
// the exported range never covers a neighbour's memory, with the MR at `offset` into it.
// FAILED_PRECONDITION when the allocation does not start and end on host pages (a small
// cuMemAlloc sharing a page with others: widening it would export a neighbour) or does not hold
// the range.
struct DmaBufRange {
  uint64_t base = 0;
  size_t size = 0;
  uint64_t offset = 0;  // of ptr from base
};
absl::StatusOr<DmaBufRange> DmaBufRangeFor(uint64_t ptr, size_t length, AllocationRange alloc,
                                           uint64_t page);

// Registers [dptr, dptr+length) of CUDA device memory on `pd` with `access` (IBV_ACCESS_*) and
// relaxed ordering where accepted. The MR's iova is dptr. INVALID_ARGUMENT for a null pd or
// zero length; FAILED_PRECONDITION when neither path works, with both reasons and what to do.
absl::StatusOr<GpuMr> RegisterGpuMemory(ibv_pd* pd, uint64_t dptr, size_t length, int access,
                                        const GpuMrOps& ops = RealGpuMrOps());

}  // namespace gdr::cuda
