// GPU memory across processes on one host, without copies and without CUDA in any header:
// exporting a device pointer the way its allocation allows (a legacy CUDA IPC handle for
// cuMemAlloc memory, a POSIX file descriptor for VMM allocations made shareable), importing it
// in another process (gdrstored's local transport, gdragent), copies between host and imported
// device memory, and page-locking host memory the copies read or write (store pages).
// Every function answers FAILED_PRECONDITION naming the cause on a host without a driver.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/base/socket.h"

namespace gdr::cuda {

inline constexpr size_t kIpcHandleBytes = 64;  // sizeof(CUipcMemHandle)

// One VMM allocation of an export: its shareable handle and its bytes.
struct ExportedChunk {
  ScopedFd fd;
  uint64_t size = 0;
};

// How the allocations that hold a device range can be handed to another process.
struct GpuExport {
  enum class Kind { kIpcHandle, kVmmFd };
  Kind kind = Kind::kIpcHandle;
  std::array<uint8_t, kIpcHandleBytes> ipc_handle{};  // kIpcHandle
  // kVmmFd: the VMM allocations mapped side by side from allocation_base, in address order
  // (one, or several where the range spans chunks: PyTorch's expandable segments).
  std::vector<ExportedChunk> chunks;
  uint64_t allocation_base = 0;  // the (first) allocation's start in this process
  size_t allocation_size = 0;    // all of them together
  std::string pci;  // the GPU's canonical PCI address
  int ordinal = -1;
};

// Exports the allocations holding [ptr, ptr + n) (AllocationsOfRange's walk, at most
// `max_chunks`): VMM allocations (cuMemRetainAllocationHandle succeeds) as a POSIX fd each,
// which needs that handle type requested at creation (FAILED_PRECONDITION saying so
// otherwise); one other device allocation as a CUDA IPC handle (cuIpcGetMemHandle).
// INVALID_ARGUMENT when the range is not device memory the driver knows, or spans what cannot
// be handed over as one (two kinds, two cudaMalloc allocations, two GPUs: named).
absl::StatusOr<GpuExport> ExportRange(uint64_t ptr, uint64_t n, size_t max_chunks);
// The one allocation holding `ptr`, as ExportRange(ptr, 1, 1).
absl::StatusOr<GpuExport> ExportAllocation(uint64_t ptr);

// A VMM allocation's descriptor handed over, and its bytes (ImportedGpuMemory::ImportVmmChunks).
struct VmmChunk {
  int fd = -1;  // borrowed
  uint64_t size = 0;
};

// Device memory another process exported, mapped into this one on the GPU `pci` names. Closed
// (cuIpcCloseMemHandle, or unmapped and released for VMM) on destruction. Thread-safe copies.
class ImportedGpuMemory {
 public:
  // cuIpcOpenMemHandle with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS; `allocation_size` is what the
  // exporter said, checked against what the driver maps.
  static absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> OpenIpcHandle(
      const std::array<uint8_t, kIpcHandleBytes>& handle, const std::string& pci,
      size_t allocation_size);
  // cuMemImportFromShareableHandle, then reserve, map and make read-write for the GPU `pci`.
  static absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> ImportVmmFd(
      int fd, const std::string& pci, size_t allocation_size);
  // The same for VMM allocations mapped side by side, as they lay in the exporter: one address
  // range reserved for `allocation_size` (their sum), each chunk mapped at its offset.
  // INVALID_ARGUMENT naming the chunk that is not an allocation's handle or not its size.
  static absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> ImportVmmChunks(
      const std::vector<VmmChunk>& chunks, const std::string& pci, size_t allocation_size);
  ~ImportedGpuMemory();
  ImportedGpuMemory(const ImportedGpuMemory&) = delete;
  ImportedGpuMemory& operator=(const ImportedGpuMemory&) = delete;

  uint64_t ptr() const { return ptr_; }  // the allocation's base here
  size_t size() const { return size_; }
  int ordinal() const { return ordinal_; }

  // Host <-> device copies of n bytes at `offset` of the allocation, complete when they return
  // (a Write reported done is seen by later GPU work). OUT_OF_RANGE outside the allocation.
  // `host` should be page-locked (PinnedHostRange) for the link's rate.
  absl::Status CopyFromHost(size_t offset, const void* host, size_t n) const;
  absl::Status CopyToHost(size_t offset, void* host, size_t n) const;

 private:
  struct Vmm;
  ImportedGpuMemory() = default;
  uint64_t ptr_ = 0;
  size_t size_ = 0;
  int ordinal_ = -1;
  std::unique_ptr<Vmm> vmm_;  // set for VMM imports
};

// Device memory allocated with the VMM API (cuMemCreate, requestedHandleTypes including
// CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) and mapped read-write here: what a process allocates
// when it will hand GPU memory over as a descriptor, which needs no shared IPC namespace
// (ExportAllocation gives the fd). Unmapped and released on destruction. Never dereference ptr()
// on the host.
class ShareableGpuMemory {
 public:
  // `bytes` is rounded up to the GPU's allocation granularity (size() says what was made).
  // INVALID_ARGUMENT for 0 bytes, RESOURCE_EXHAUSTED when the GPU is full.
  static absl::StatusOr<std::unique_ptr<ShareableGpuMemory>> Create(int ordinal, size_t bytes);
  ~ShareableGpuMemory();
  ShareableGpuMemory(const ShareableGpuMemory&) = delete;
  ShareableGpuMemory& operator=(const ShareableGpuMemory&) = delete;

  uint64_t ptr() const { return ptr_; }
  size_t size() const { return size_; }
  int ordinal() const { return ordinal_; }

 private:
  ShareableGpuMemory() = default;
  uint64_t ptr_ = 0;
  size_t size_ = 0;
  int ordinal_ = -1;
};

// Page-locks [p, p + n) of host memory this process mapped (cuMemHostRegister, portable), so
// copies to and from any GPU run at the link's rate; unlocked on destruction. For store pages.
// `read_only`: locked for copies out of it only (CU_MEMHOSTREGISTER_READ_ONLY), which the kernel
// grants for a shared file mapping where a writable long-term pin is refused; a copy into the
// range must then not be made from a GPU.
class PinnedHostRange {
 public:
  static absl::StatusOr<std::unique_ptr<PinnedHostRange>> Create(void* p, size_t n,
                                                                 bool read_only = false);
  ~PinnedHostRange();
  PinnedHostRange(const PinnedHostRange&) = delete;
  PinnedHostRange& operator=(const PinnedHostRange&) = delete;

 private:
  PinnedHostRange(void* p) : p_(p) {}
  void* p_;
};

}  // namespace gdr::cuda
