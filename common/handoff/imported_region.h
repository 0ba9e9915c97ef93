// Memory a client process handed over (common/wire/handoff_message.h), as the receiving server
// (gdrstored's local transport, gdragent) holds it: mapped into this process, with the
// client's address and rkey that descriptors name it by. Shared: an op in flight holds a
// reference, so a region deregistered or whose client went away stays mapped until that op is
// done, and is unmapped (memfd munmap'ed, CUDA IPC handle closed, VMM mapping released) when
// the last reference goes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/socket.h"
#include "common/wire/handoff_message.h"

namespace gdr::cuda {
class ImportedGpuMemory;
}

namespace gdr::handoff {

// One VMM allocation of a range mapped from several (REGISTER_CHUNK): its shareable descriptor
// and its bytes.
struct StagedChunk {
  ScopedFd fd;
  uint64_t size = 0;
};

class ImportedRegion {
 public:
  // Maps what `r` describes. kHostMemfd: `fd` must be a memfd or regular file (fstat) at least
  // offset + size bytes long (else INVALID_ARGUMENT saying "not a memfd" / "past the end of the
  // memfd"); mapped shared, writable only when r.writable. GPU kinds: imported through
  // common/cuda/gpu_ipc.h on the GPU r.gpu names (FAILED_PRECONDITION naming the cause when
  // this host has no driver or cannot import, INVALID_ARGUMENT for a range past the
  // allocation). kGpuVmmChunks: `chunks` (what the session staged, in address order) are mapped
  // side by side and must add up to r.allocation_size; every other kind takes none. `rkey` is
  // what the server assigned.
  static absl::StatusOr<std::shared_ptr<ImportedRegion>> Import(
      const Register& r, ScopedFd fd, uint32_t rkey, std::vector<StagedChunk> chunks = {});
  ~ImportedRegion();
  ImportedRegion(const ImportedRegion&) = delete;
  ImportedRegion& operator=(const ImportedRegion&) = delete;

  MemoryKind kind() const { return kind_; }
  bool gpu() const { return kind_ != MemoryKind::kHostMemfd; }
  uint64_t address() const { return address_; }  // the client's address of byte 0
  uint64_t size() const { return size_; }
  uint32_t rkey() const { return rkey_; }
  bool writable() const { return writable_; }
  // Host kinds: byte 0 of the region in this process. Null for GPU memory.
  std::byte* host() const { return host_; }
  // GPU kinds: byte 0 of the region as a device pointer in this process, and its GPU.
  uint64_t device_ptr() const;
  int gpu_ordinal() const;
  const cuda::ImportedGpuMemory* gpu_memory() const { return gpu_.get(); }
  // What was handed over and its descriptor (-1 for an IPC handle, and once released), kept
  // so that the memory can be handed on as it came (gdragent to a daemon over transport local:
  // CUDA does not export imported memory again, and a memfd is better passed than copied).
  const Register& source() const { return source_; }
  int source_fd() const { return source_fd_.get(); }
  // kGpuVmmChunks: each chunk's descriptor (-1 once released) and bytes.
  const std::vector<StagedChunk>& source_chunks() const { return source_chunks_; }
  // Closes the descriptors: the mapping (or the driver's import) keeps the memory. The handoff
  // server calls it once on_register has handed the memory on, so that a region holds no
  // descriptor of the process for its life. Not thread-safe against source_fd().
  void ReleaseDescriptor() {
    source_fd_.Reset();
    for (StagedChunk& c : source_chunks_) c.fd.Reset();
  }

 private:
  ImportedRegion() = default;
  MemoryKind kind_ = MemoryKind::kHostMemfd;
  uint64_t address_ = 0;
  uint64_t size_ = 0;
  uint32_t rkey_ = 0;
  bool writable_ = false;
  // Host: the whole mapping (page-aligned start and length) and byte 0 inside it.
  void* map_ = nullptr;
  size_t map_len_ = 0;
  std::byte* host_ = nullptr;
  std::unique_ptr<cuda::ImportedGpuMemory> gpu_;
  uint64_t gpu_offset_ = 0;  // GPU: byte 0 of the region from the allocation's base
  Register source_;
  ScopedFd source_fd_;
  std::vector<StagedChunk> source_chunks_;
};

}  // namespace gdr::handoff
