// Client memory the daemon may reach: one allocation (host or GPU) with its iova, size and
// rkey, shared by the Buffer that exposes it and the transport that registered it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/cuda/gpu.h"

namespace gdr {

// One registered region. Memory is released by `release` (host) or with `gpu` (device memory)
// when the last reference goes, so an access in flight keeps it mapped even after
// deregistration.
struct Region {
  uint64_t base = 0;  // iova (= host address for host memory, the CUdeviceptr for GPU memory)
  size_t size = 0;
  std::byte* host = nullptr;  // null for GPU memory: device pointers are never dereferenced
  std::shared_ptr<const cuda::DeviceMemory> gpu;  // set for GPU memory
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
  ~Region() {
    if (release) release();
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
