// GPU memory without CUDA in any header: listing the GPUs, choosing one by PCI address or CUDA
// ordinal, device allocations and pinned host memory. Built against the CUDA Toolkit's headers
// when GDR_WITH_CUDA is on; the driver is loaded at run time (cuda_api.h), so every function
// here answers FAILED_PRECONDITION naming the cause on a host without a driver, and on a build
// without CUDA support.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr::cuda {

struct CudaApi;

struct GpuInfo {
  int ordinal = -1;       // CUDA device ordinal (as CUDA_VISIBLE_DEVICES orders them)
  std::string pci;        // canonical, lowercase: "0000:b7:00.0"
  std::string name;       // "NVIDIA H100 80GB HBM3"
  uint64_t total_bytes = 0;
  bool dma_buf = false;   // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
};

// True when this build has GPU support compiled in.
bool BuiltWithCuda();

// OK when the driver loads and initialises; the reason otherwise (FAILED_PRECONDITION).
absl::Status DriverStatus();

// Every GPU the driver sees, by ordinal. FAILED_PRECONDITION when there is no driver (or no
// CUDA support in this build); an empty list is never returned (no GPU is an error too).
absl::StatusOr<std::vector<GpuInfo>> ListGpus();

// What RetainContexts did: the GPUs whose primary context this process now holds, and a line
// for each one it left to its first use (why).
struct RetainedContexts {
  std::vector<int> ordinals;
  std::vector<std::string> left;
};

// Makes every GPU's primary context now, once per process (never released). Why: host memory
// page-locked portable is mapped into every context that exists, and a context made later maps
// all of it at once (about 17 ms per GiB locked on an H200 host, bench/context_cost.py), so a
// process that page-locks GiBs and later imports memory from another GPU makes its contexts
// first. A GPU not in the default compute mode is left alone (a context here would take an
// exclusive GPU from its users), as is one whose context fails. FAILED_PRECONDITION without
// a driver.
absl::StatusOr<RetainedContexts> RetainContexts();

// Resolves `spec` (see gpu_select.h) against the GPUs the driver sees.
absl::StatusOr<GpuInfo> FindGpu(absl::string_view spec);

// cuMemAlloc in the GPU's primary context (what cudaMalloc does) with
// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set, so synchronous copies and RDMA see a consistent view.
// Freed (and the primary context released) on destruction. Copies are synchronous and may be
// called from any thread. Never dereference ptr() on the host.
class DeviceMemory {
 public:
  // INVALID_ARGUMENT for size 0, RESOURCE_EXHAUSTED when the GPU is full, FAILED_PRECONDITION
  // without a driver.
  static absl::StatusOr<std::unique_ptr<DeviceMemory>> Create(int ordinal, size_t bytes);
  // Device memory someone else allocated (cuMemAlloc, a torch or CuPy allocation), [ptr,
  // ptr + bytes), never freed here. INVALID_ARGUMENT naming the pointer when CUDA does not
  // know it as device memory (host memory, freed, never allocated) or the range runs past the
  // end of its allocation; FAILED_PRECONDITION without a driver.
  static absl::StatusOr<std::unique_ptr<DeviceMemory>> Borrow(uint64_t ptr, size_t bytes);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  uint64_t ptr() const { return ptr_; }  // CUdeviceptr
  size_t size() const { return size_; }
  int ordinal() const { return ordinal_; }

  // Host <-> device copies of [offset, offset+n); OUT_OF_RANGE outside the allocation.
  absl::Status CopyFromHost(size_t offset, const void* src, size_t n) const;
  absl::Status CopyToHost(size_t offset, void* dst, size_t n) const;
  absl::Status Memset(uint8_t value) const;

 private:
  DeviceMemory(int ordinal, uint64_t ptr, size_t size, bool owned = true)
      : ordinal_(ordinal), ptr_(ptr), size_(size), owned_(owned) {}
  // Checks [offset, +n) against the buffer and makes this GPU current for a copy.
  absl::StatusOr<const CudaApi*> ApiForCopy(size_t offset, size_t n) const;
  int ordinal_;
  uint64_t ptr_;
  size_t size_;
  bool owned_;  // freed by the destructor
};

// Page-locked host memory (cuMemHostAlloc, portable), for staging and baselines.
class PinnedMemory {
 public:
  static absl::StatusOr<std::unique_ptr<PinnedMemory>> Create(size_t bytes);
  ~PinnedMemory();
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  PinnedMemory(std::byte* data, size_t size) : data_(data), size_(size) {}
  std::byte* data_;
  size_t size_;
};

// Device allocations the library makes are rounded up to this, so each starts and ends on a
// boundary a dma-buf export can name without covering a neighbour (cuMemAlloc may place small
// allocations inside one 2 MiB page).
inline constexpr size_t kGpuAllocationGranule = size_t{2} << 20;

// The CUDA allocation that holds a device pointer (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR/SIZE).
struct AllocationRange {
  uint64_t base = 0;
  size_t size = 0;
};
// INVALID_ARGUMENT when `ptr` is not device memory the driver knows.
absl::StatusOr<AllocationRange> AllocationOf(uint64_t ptr);

struct DmaBuf {
  int fd = -1;
  // Exported with CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE: the NIC reaches the memory
  // through the GPU's PCIe BAR1 (what C2C platforms need for a PCIe NIC).
  bool pcie_mapping = false;
};
// A dma-buf file descriptor for [ptr, ptr+length) of device memory
// (cuMemGetHandleForAddressRange); both must be host-page aligned. The PCIe mapping is asked for
// first where the driver knows it (CUDA 12.8), then the default mapping. The caller owns the fd.
absl::StatusOr<DmaBuf> DmaBufFd(uint64_t ptr, size_t length);

// Which GPU ordinal owns device pointer `ptr` (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL);
// INVALID_ARGUMENT when it is not device memory the driver knows.
absl::StatusOr<int> PointerOrdinal(uint64_t ptr);

// Puts back, on destruction, the CUDA context that was current on the calling thread when it
// was made (none, if none was). For library code called from inside another library's CUDA
// work (PyTorch's allocator hooks): the calls here make a GPU's primary context current, and
// the CUDA runtime takes the current context for its current device, so without this a free on
// GPU 1 would move the caller's current device to 1. Without a driver it does nothing. Not
// copyable; use on one thread.
class CurrentContextKeeper {
 public:
  CurrentContextKeeper();
  ~CurrentContextKeeper();
  CurrentContextKeeper(const CurrentContextKeeper&) = delete;
  CurrentContextKeeper& operator=(const CurrentContextKeeper&) = delete;

 private:
  void* saved_ = nullptr;  // the CUcontext
  bool restore_ = false;   // whether one was read
};

// Waits for all work queued on GPU `ordinal`'s primary context: what cudaFree implies before
// memory goes, and what unmapping VMM memory does not. Leaves that context current.
// FAILED_PRECONDITION without a driver; the driver's error (a failed kernel's) otherwise.
absl::Status SynchronizeDevice(int ordinal);

}  // namespace gdr::cuda
