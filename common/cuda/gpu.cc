#include "common/cuda/gpu.h"

#include <unistd.h>

#include <map>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/cuda/cuda_api.h"
#include "common/cuda/context.h"
#include "common/cuda/gpu_select.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"

namespace gdr::cuda {

bool BuiltWithCuda() { return true; }

absl::Status DriverStatus() { return Api().status(); }

absl::Status UseDevice(const CudaApi& api, int ordinal) {
  static std::mutex mu;
  static std::map<int, CUcontext>* contexts = new std::map<int, CUcontext>();
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = contexts->find(ordinal);
    if (it == contexts->end()) {
      CUdevice dev = 0;
      GDR_CU_RETURN_IF_ERROR(api, cuDeviceGet(&dev, ordinal));
      // Retained for the life of the process: allocations and staging streams of any thread
      // live in it, and releasing the last reference would destroy them.
      GDR_CU_RETURN_IF_ERROR(api, cuDevicePrimaryCtxRetain(&ctx, dev));
      contexts->emplace(ordinal, ctx);
    } else {
      ctx = it->second;
    }
  }
  GDR_CU_RETURN_IF_ERROR(api, cuCtxSetCurrent(ctx));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<GpuInfo>> ListGpus() {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  int count = 0;
  GDR_CU_RETURN_IF_ERROR(api, cuDeviceGetCount(&count));
  if (count == 0) {
    return absl::FailedPreconditionError("the NVIDIA driver is loaded but sees no GPU");
  }
  std::vector<GpuInfo> gpus;
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    GDR_CU_RETURN_IF_ERROR(api, cuDeviceGet(&dev, i));
    GpuInfo g;
    g.ordinal = i;
    char buf[256] = {};
    GDR_CU_RETURN_IF_ERROR(api, cuDeviceGetName(buf, sizeof(buf) - 1, dev));
    g.name = buf;
    char pci[64] = {};
    GDR_CU_RETURN_IF_ERROR(api, cuDeviceGetPCIBusId(pci, sizeof(pci) - 1, dev));
    absl::StatusOr<std::string> canon = CanonicalPciAddress(pci);
    g.pci = canon.ok() ? *canon : absl::AsciiStrToLower(pci);
    size_t total = 0;
    GDR_CU_RETURN_IF_ERROR(api, cuDeviceTotalMem(&total, dev));
    g.total_bytes = total;
    int dmabuf = 0;
    if (api.cuDeviceGetAttribute(&dmabuf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) ==
        CUDA_SUCCESS) {
      g.dma_buf = dmabuf != 0;
    }
    gpus.push_back(std::move(g));
  }
  return gpus;
}

absl::StatusOr<RetainedContexts> RetainContexts() {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  int count = 0;
  GDR_CU_RETURN_IF_ERROR(api, cuDeviceGetCount(&count));
  RetainedContexts out;
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    int mode = CU_COMPUTEMODE_DEFAULT;
    if (api.cuDeviceGet(&dev, i) == CUDA_SUCCESS &&
        api.cuDeviceGetAttribute(&mode, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, dev) == CUDA_SUCCESS &&
        mode != CU_COMPUTEMODE_DEFAULT) {
      out.left.push_back(absl::StrCat("GPU ", i, ": compute mode ", mode,
                                      " is not the default (shared), so its context waits "
                                      "for its first use"));
      continue;
    }
    if (absl::Status s = UseDevice(api, i); !s.ok()) {
      out.left.push_back(absl::StrCat("GPU ", i, ": ", s.message()));
      continue;
    }
    out.ordinals.push_back(i);
  }
  return out;
}

absl::StatusOr<GpuInfo> FindGpu(absl::string_view spec) {
  GDR_RETURN_IF_ERROR(ValidateGpuSpec(spec));
  absl::StatusOr<std::vector<GpuInfo>> gpus = ListGpus();
  if (!gpus.ok()) {
    return absl::Status(gpus.status().code(),
                        absl::StrCat("GPU '", spec, "': ", gpus.status().message()));
  }
  return ResolveGpu(spec, *gpus);
}

// ---- DeviceMemory ----

absl::StatusOr<std::unique_ptr<DeviceMemory>> DeviceMemory::Create(int ordinal, size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("GPU buffer size must be > 0");
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  GDR_RETURN_IF_ERROR(UseDevice(api, ordinal));
  if (bytes > SIZE_MAX - kGpuAllocationGranule) {
    return absl::InvalidArgumentError(absl::StrCat("GPU buffer size ", bytes, " is too large"));
  }
  CUdeviceptr p = 0;
  const size_t rounded = (bytes + kGpuAllocationGranule - 1) / kGpuAllocationGranule *
                         kGpuAllocationGranule;
  GDR_CU_RETURN_IF_ERROR(api, cuMemAlloc(&p, rounded));
  std::unique_ptr<DeviceMemory> mem(new DeviceMemory(ordinal, p, bytes));
  // Synchronous memory operations on this range (cuMemcpy, and the copies a peer device's DMA
  // races with) complete in order: what GPUDirect RDMA users must set on buffers they expose.
  unsigned int one = 1;
  GDR_CU_RETURN_IF_ERROR(api, cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
  return mem;
}

absl::StatusOr<std::unique_ptr<DeviceMemory>> DeviceMemory::Borrow(uint64_t ptr, size_t bytes) {
  const std::string what = absl::StrCat("0x", absl::Hex(ptr), " (+", bytes, " bytes)");
  if (ptr == 0 || bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat("GPU memory ", what, ": needs a pointer and "
                                                   "a size > 0"));
  }
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  unsigned int type = 0;
  if (api.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) != CUDA_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPU memory ", what, ": CUDA does not know this pointer (host memory, freed, or never "
        "allocated)"));
  }
  if (type != CU_MEMORYTYPE_DEVICE) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPU memory ", what, ": is host memory to CUDA (pinned or mapped), not device memory; "
        "register it as host memory"));
  }
  int ordinal = -1;
  GDR_CU_RETURN_IF_ERROR(api, cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                                    ptr));
  absl::StatusOr<AllocationRange> alloc = AllocationOf(ptr);
  if (!alloc.ok()) return alloc.status();
  const uint64_t start = alloc->base;
  const size_t size = alloc->size;
  if (bytes > size - (ptr - start)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPU memory ", what, ": runs past the end of its allocation [0x", absl::Hex(start),
        ", +", size, ") on GPU ", ordinal, " (a range may not cross two allocations)"));
  }
  return std::unique_ptr<DeviceMemory>(new DeviceMemory(ordinal, ptr, bytes, /*owned=*/false));
}

DeviceMemory::~DeviceMemory() {
  if (!owned_) return;
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return;
  const CudaApi& api = **loaded;
  if (!UseDevice(api, ordinal_).ok()) return;
  const CUresult r = api.cuMemFree(ptr_);
  if (r != CUDA_SUCCESS) {
    GDR_LOG(kError) << CudaError(api, r, "cuMemFree", __FILE__, __LINE__).message();
  }
}

absl::StatusOr<const CudaApi*> DeviceMemory::ApiForCopy(size_t offset, size_t n) const {
  if (offset > size_ || n > size_ - offset) {
    return absl::OutOfRangeError(
        absl::StrCat("[", offset, ", +", n, ") is outside the ", size_, "-byte GPU buffer"));
  }
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  GDR_RETURN_IF_ERROR(UseDevice(**loaded, ordinal_));
  return *loaded;
}

absl::Status DeviceMemory::CopyFromHost(size_t offset, const void* src, size_t n) const {
  absl::StatusOr<const CudaApi*> loaded = ApiForCopy(offset, n);
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  if (n == 0) return absl::OkStatus();
  GDR_CU_RETURN_IF_ERROR(api, cuMemcpyHtoD(ptr_ + offset, src, n));
  return absl::OkStatus();
}

absl::Status DeviceMemory::CopyToHost(size_t offset, void* dst, size_t n) const {
  absl::StatusOr<const CudaApi*> loaded = ApiForCopy(offset, n);
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  if (n == 0) return absl::OkStatus();
  GDR_CU_RETURN_IF_ERROR(api, cuMemcpyDtoH(dst, ptr_ + offset, n));
  return absl::OkStatus();
}

absl::Status DeviceMemory::Memset(uint8_t value) const {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  GDR_RETURN_IF_ERROR(UseDevice(api, ordinal_));
  GDR_CU_RETURN_IF_ERROR(api, cuMemsetD8(ptr_, value, size_));
  return absl::OkStatus();
}

// ---- PinnedMemory ----

absl::StatusOr<std::unique_ptr<PinnedMemory>> PinnedMemory::Create(size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("pinned buffer size must be > 0");
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  // Pinned memory needs a current context; the first GPU's primary context is as good as any
  // (CU_MEMHOSTALLOC_PORTABLE makes it pinned for every context).
  GDR_RETURN_IF_ERROR(UseDevice(api, 0));
  void* p = nullptr;
  GDR_CU_RETURN_IF_ERROR(api, cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE));
  return std::unique_ptr<PinnedMemory>(new PinnedMemory(static_cast<std::byte*>(p), bytes));
}

PinnedMemory::~PinnedMemory() {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return;
  const CUresult r = (*loaded)->cuMemFreeHost(data_);
  if (r != CUDA_SUCCESS) {
    GDR_LOG(kError) << CudaError(**loaded, r, "cuMemFreeHost", __FILE__, __LINE__).message();
  }
}

absl::StatusOr<AllocationRange> AllocationOf(uint64_t ptr) {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  CUdeviceptr base = 0;
  size_t size = 0;
  CUresult r = api.cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, ptr);
  if (r == CUDA_SUCCESS) r = api.cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, ptr);
  if (r != CUDA_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat(
        "0x", absl::Hex(ptr), " is not CUDA device memory: ",
        CudaError(api, r, "cuPointerGetAttribute(RANGE)", __FILE__, __LINE__).message()));
  }
  return AllocationRange{base, size};
}

absl::StatusOr<DmaBuf> DmaBufFd(uint64_t ptr, size_t length) {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  absl::StatusOr<int> ordinal = PointerOrdinal(ptr);
  if (!ordinal.ok()) return ordinal.status();
  GDR_RETURN_IF_ERROR(UseDevice(api, *ordinal));
  DmaBuf buf;
#if CUDA_VERSION >= 12080
  // Drivers before 12.8 refuse the flag; a platform without C2C may too. Either way the default
  // mapping is the answer.
  if (api.driver_version >= 12080 &&
      api.cuMemGetHandleForAddressRange(&buf.fd, ptr, length,
                                        CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                                        CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE) ==
          CUDA_SUCCESS) {
    buf.pcie_mapping = true;
    return buf;
  }
#endif
  GDR_CU_RETURN_IF_ERROR(api, cuMemGetHandleForAddressRange(
                                  &buf.fd, ptr, length, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
  return buf;
}

absl::StatusOr<int> PointerOrdinal(uint64_t ptr) {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  int ordinal = -1;
  const CUresult r =
      api.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr);
  if (r != CUDA_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat(
        "0x", absl::Hex(ptr), " is not CUDA device memory: ",
        CudaError(api, r, "cuPointerGetAttribute", __FILE__, __LINE__).message()));
  }
  return ordinal;
}

// ---- the caller's context ----

CurrentContextKeeper::CurrentContextKeeper() {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return;
  CUcontext ctx = nullptr;
  if ((*loaded)->cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) return;
  saved_ = ctx;
  restore_ = true;
}

CurrentContextKeeper::~CurrentContextKeeper() {
  if (!restore_) return;
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return;
  const CUresult r = (*loaded)->cuCtxSetCurrent(static_cast<CUcontext>(saved_));
  if (r != CUDA_SUCCESS) {
    GDR_LOG(kError) << CudaError(**loaded, r, "cuCtxSetCurrent(the caller's context)", __FILE__,
                                 __LINE__).message();
  }
}

absl::Status SynchronizeDevice(int ordinal) {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  GDR_RETURN_IF_ERROR(UseDevice(api, ordinal));
  GDR_CU_RETURN_IF_ERROR(api, cuCtxSynchronize());
  return absl::OkStatus();
}

}  // namespace gdr::cuda
