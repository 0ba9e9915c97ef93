#include "client/src/transport/verbs_registration.h"

#include "absl/strings/str_cat.h"
#include "common/cuda/gpu_direct.h"
#include "common/cuda/gpu_mr.h"
#include "common/verbs/memory_region.h"

namespace gdr {

namespace {
// What the daemon may do to a registered buffer: one-sided reads and writes.
constexpr int kRemoteAccess =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
}  // namespace

absl::Status RegisterOnDevice(const verbs::VerbsDevice& device,
                              std::shared_ptr<const void> owner, Region& region) {
  std::function<void()> deregister;
  if (region.gpu) {
    // The NIC reaches GPU memory itself (dma-buf, else nvidia-peermem).
    absl::StatusOr<cuda::GpuMr> mr =
        cuda::RegisterGpuMemory(device.pd(), region.base, region.size, kRemoteAccess);
    if (!mr.ok()) {
      return absl::Status(mr.status().code(),
                          absl::StrCat("memory cannot be registered with ", device.name(), ": ",
                                       mr.status().message()));
    }
    // Gets land in GPU memory through the NIC: complete them only once the GPU sees the bytes.
    absl::StatusOr<std::function<absl::Status()>> fence =
        cuda::WriteFenceFor(region.gpu->ordinal(), cuda::RealGpuDirectOps());
    if (!fence.ok()) return fence.status();
    region.write_fence = std::move(*fence);
    region.rkey = mr->mr->rkey;
    region.gpu_way = mr->method == cuda::GpuMrMethod::kDmaBuf ? "dma-buf" : "peermem";
    if (!mr->dmabuf_unavailable.empty()) {
      region.gpu_way_note = absl::StrCat("dma-buf: ", mr->dmabuf_unavailable);
    }
    deregister = [mr = std::make_shared<cuda::MrPtr>(std::move(mr->mr))] { mr->reset(); };
  } else {
    absl::StatusOr<std::unique_ptr<verbs::MemoryRegion>> mr =
        verbs::MemoryRegion::Register(device.pd(), region.host, region.size,
                                      region.writable ? kRemoteAccess : IBV_ACCESS_REMOTE_READ);
    if (!mr.ok()) return mr.status();
    region.rkey = (*mr)->rkey();
    deregister = [mr = std::shared_ptr<verbs::MemoryRegion>(std::move(*mr))]() mutable {
      mr.reset();
    };
  }
  // Deregistered before the memory goes (host: before the region's own release unmaps it;
  // GPU: before the device memory member is freed); the owner keeps the PD until then.
  region.release = [deregister = std::move(deregister), owner = std::move(owner),
                    free_memory = std::move(region.release)] {
    deregister();
    if (free_memory) free_memory();
  };
  return absl::OkStatus();
}

}  // namespace gdr
