// Client memory the daemon may reach: one allocation (host or GPU) with its iova, size and
// rkey, shared by the Buffer that exposes it and the transport that registered it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unistd.h>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/cuda/gpu.h"
#include "gdrstore/types.h"

namespace gdr {

// One registered region. Memory is released by `release` (host) or with `gpu` (device memory)
// when the last reference goes, so an access in flight keeps it mapped even after
// deregistration.
struct Region {
  uint64_t base = 0;  // iova (= host address for host memory, the CUdeviceptr for GPU memory)
  size_t size = 0;
  std::byte* host = nullptr;  // null for GPU memory: device pointers are never dereferenced
  std::shared_ptr<const cuda::DeviceMemory> gpu;  // set for GPU memory
  // GPU memory: how the transport reaches it (a WAY of op_path.h: dma-buf, peermem, staged,
  // cuda-ipc, vmm-fd), set by Register; and why not a faster way, where it fell back.
  std::string gpu_way;
  std::string gpu_way_note;
  uint32_t rkey = 0;
  // Several rails (RailSet): the rkey on each, in rail order (rkey is the first), and the
  // rails nearest the memory (a GPU's by PCIe topology; every rail for host memory).
  std::vector<uint32_t> rail_rkeys;
  std::vector<int> near_rails;
  // False for host memory the caller registered that is mapped read-only: the daemon may read
  // it (put), never write it (get).
  bool writable = true;
  // Runs after the daemon wrote into this memory through the NIC and before the op is reported
  // done: the GPUDirect RDMA flush GPU memory needs where its GPU does not order NIC writes
  // (gpu_direct.h). Empty where nothing is needed.
  std::function<absl::Status()> write_fence;
  std::function<void()> release;
  // Host memory the library allocated: the memfd it is mapped from (at offset 0, sealed against
  // shrinking), which the local transport and the agent hand over; -1 for memory the caller
  // owns. Closed by `release`.
  int memfd = -1;
  // Memory this process was handed (Client::RegisterHandedOver): how, so that transport local
  // hands it on the same way. Its fd is the region's own (a dup) while the transport registers
  // it, closed then (-1).
  std::optional<gdrstore::HandedOver> handed_over;
  ~Region() {
    if (release) release();
    if (handed_over) CloseHandedOverFds();
  }
  // The handed-over descriptors, once no transport needs them.
  void CloseHandedOverFds() {
    if (handed_over->fd >= 0) ::close(handed_over->fd);
    handed_over->fd = -1;
    for (gdrstore::HandedOver::VmmChunk& c : handed_over->chunks) {
      if (c.fd >= 0) ::close(c.fd);
      c.fd = -1;
    }
  }
};

// OK when [offset, offset+n) lies inside a `size`-byte buffer; otherwise a status of `code`
// saying so (callers differ only in the code: a bad descriptor vs a bad copy).
inline absl::Status CheckRange(size_t offset, size_t n, size_t size, absl::StatusCode code) {
  if (offset <= size && n <= size - offset) return absl::OkStatus();
  return absl::Status(code, absl::StrCat("range [", offset, ", +", n, ") is outside the ", size,
                                         "-byte buffer"));
}

}  // namespace gdr
