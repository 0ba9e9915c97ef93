// Client::RegisterHandedOver: memory another process handed to this one (the node agent's
// clients'), registered with the handle it came by so that transport local can hand it on.
#include <fcntl.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "client/src/host_memory.h"
#include "client/src/registration.h"
#include "client/src/transport/client_transport.h"
#include "client/src/transport/region.h"
#include "common/base/status_macros.h"
#include "common/cuda/gpu.h"
#include "gdrstore/client.h"

namespace gdrstore {

absl::StatusOr<std::unique_ptr<Buffer>> Client::RegisterHandedOver(void* p, uint64_t device_ptr,
                                                                   size_t n,
                                                                   const HandedOver& from) {
  const bool gpu = from.kind != HandedOver::Kind::kHostMemfd;
  if (n == 0) return absl::InvalidArgumentError("handed-over memory: a buffer needs a size > 0");
  if (gpu ? device_ptr == 0 : p == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "handed-over memory: ", gpu ? "GPU memory needs its device pointer"
                                    : "host memory needs its address in this process"));
  }
  const bool chunked = !from.chunks.empty();
  if (chunked && (from.kind != HandedOver::Kind::kGpuVmmFd || from.fd >= 0)) {
    return absl::InvalidArgumentError(
        "handed-over memory: chunks are for VMM memory mapped from several allocations, "
        "without a single fd");
  }
  if (from.kind != HandedOver::Kind::kGpuIpcHandle && from.fd < 0 && !chunked) {
    return absl::InvalidArgumentError("handed-over memory: a memfd or VMM kind needs its fd");
  }
  auto region = std::make_shared<gdr::Region>();
  region->size = n;
  if (gpu) {
    GDR_RETURN_IF_ERROR(transport_->CanServeGpuMemory());
    GDR_ASSIGN_OR_RETURN(std::unique_ptr<gdr::cuda::DeviceMemory> mem,
                         gdr::cuda::DeviceMemory::Borrow(device_ptr, n));
    region->base = device_ptr;
    region->gpu = std::move(mem);
  } else {
    GDR_ASSIGN_OR_RETURN(region->writable, gdr::HostRangeWritable(p, n));
    region->host = static_cast<std::byte*>(p);
    region->base = reinterpret_cast<uint64_t>(p);
  }
  // The region's own duplicates, closed with it (or once handed on, below).
  region->handed_over = from;
  region->handed_over->fd = -1;
  for (HandedOver::VmmChunk& c : region->handed_over->chunks) c.fd = -1;
  if (from.fd >= 0) {
    region->handed_over->fd = ::fcntl(from.fd, F_DUPFD_CLOEXEC, 0);
    if (region->handed_over->fd < 0) {
      return absl::ErrnoToStatus(errno, "handed-over memory: dup of its fd");
    }
  }
  for (size_t i = 0; i < from.chunks.size(); ++i) {
    if (from.chunks[i].fd < 0) {
      return absl::InvalidArgumentError(absl::StrCat("handed-over memory: chunk ", i,
                                                     " has no fd"));
    }
    const int fd = ::fcntl(from.chunks[i].fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return absl::ErrnoToStatus(errno, "handed-over memory: dup of a chunk's fd");
    region->handed_over->chunks[i].fd = fd;
  }
  absl::StatusOr<std::function<void()>> withdraw = RegisterRegion(region);
  // Transport local has handed the descriptor on (the daemon holds its own); no transport uses
  // it again. Kept for the region's life it would cost the node agent one descriptor per region
  // of its clients, per daemon.
  region->CloseHandedOverFds();
  if (!withdraw.ok()) return withdraw.status();
  // Counted among the live registrations, but never handed out again (RegistrationCache::Find
  // skips it): a range registered the ordinary way must not pick up another process's handle.
  auto registration = std::make_shared<gdr::Registration>(std::move(region), std::move(*withdraw));
  registrations_->Add(registration);
  std::unique_ptr<Buffer> buffer(new Buffer(std::move(registration), 0, n));
  if (gpu) buffer->gpu_pci_ = from.gpu;
  return buffer;
}

}  // namespace gdrstore
