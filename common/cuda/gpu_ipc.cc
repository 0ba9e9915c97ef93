#include "common/cuda/gpu_ipc.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/cuda/context.h"
#include "common/cuda/cuda_api.h"
#include "common/cuda/gpu.h"
#include "common/cuda/gpu_select.h"

namespace gdr::cuda {

static_assert(sizeof(CUipcMemHandle) == kIpcHandleBytes, "CUipcMemHandle changed size");

// A VMM import: the generic handle is released once mapped (the mapping holds the memory);
// what is left to undo is the mapping and the address reservation.
struct ImportedGpuMemory::Vmm {
  size_t mapped = 0;  // bytes mapped and reserved at ptr_
};

namespace {

absl::StatusOr<const CudaApi*> LoadedApi() {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  return *loaded;
}

// The ordinal, in this process, of the GPU at PCI address `pci` (processes may see GPUs in
// different orders: CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER). INVALID_ARGUMENT for a malformed
// address, NOT_FOUND listing the GPUs here when none matches.
absl::StatusOr<int> OrdinalOf(const std::string& pci) {
  absl::StatusOr<std::string> canon = CanonicalPciAddress(pci);
  if (!canon.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU '", pci.substr(0, 32), "': ", canon.status().message()));
  }
  absl::StatusOr<GpuInfo> gpu = FindGpu(*canon);
  if (!gpu.ok()) return gpu.status();
  return gpu->ordinal;
}

std::string Where(uint64_t ptr) { return absl::StrCat("0x", absl::Hex(ptr)); }

// Waits for this thread's copies on the current context: with the per-thread stream a copy
// from pageable memory that the driver staged, or a DMA from pinned memory, has landed before
// the call returns, whatever SYNC_MEMOPS the exporting process set on the allocation.
absl::Status Drain(const CudaApi& api) {
  GDR_CU_RETURN_IF_ERROR(api, cuStreamSynchronize(CU_STREAM_PER_THREAD));
  return absl::OkStatus();
}

// A VMM mapping [va, +size) made readable and writable by GPU `ordinal` (a mapping is not
// accessible until this is set, for the importer as for the allocator).
absl::Status GrantReadWrite(const CudaApi& api, CUdeviceptr va, size_t size, int ordinal) {
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = ordinal;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  GDR_CU_RETURN_IF_ERROR(api, cuMemSetAccess(va, size, &access, 1));
  return absl::OkStatus();
}

}  // namespace

namespace {

absl::Status FillGpu(const CudaApi& api, int ordinal, GpuExport* out) {
  out->ordinal = ordinal;
  CUdevice dev = 0;
  GDR_CU_RETURN_IF_ERROR(api, cuDeviceGet(&dev, ordinal));
  char pci[64] = {};
  GDR_CU_RETURN_IF_ERROR(api, cuDeviceGetPCIBusId(pci, sizeof(pci) - 1, dev));
  GDR_ASSIGN_OR_RETURN(out->pci, CanonicalPciAddress(pci));
  return absl::OkStatus();
}

// A VMM allocation (`handle`, retained for `ptr`) as a POSIX fd: its range is the mapping that
// holds `ptr` (cuMemMap maps whole allocations), its GPU where the allocation lives.
absl::StatusOr<GpuExport> ExportVmm(const CudaApi& api, uint64_t ptr,
                                    CUmemGenericAllocationHandle handle) {
  CUmemAllocationProp prop = {};
  GDR_CU_RETURN_IF_ERROR(api, cuMemGetAllocationPropertiesFromHandle(&prop, handle));
  if ((prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU memory ", Where(ptr), " is a VMM allocation (cuMemCreate) that was not made "
        "shareable: create it with CUmemAllocationProp.requestedHandleTypes including "
        "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR to hand it to another process"));
  }
  if (prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU memory ", Where(ptr), " is a VMM allocation that does not live on a GPU"));
  }
  GpuExport out;
  GDR_RETURN_IF_ERROR(FillGpu(api, prop.location.id, &out));
  GDR_RETURN_IF_ERROR(UseDevice(api, out.ordinal));
  CUdeviceptr base = 0;
  size_t size = 0;
  GDR_CU_RETURN_IF_ERROR(api, cuMemGetAddressRange(&base, &size, ptr));
  int fd = -1;
  GDR_CU_RETURN_IF_ERROR(api, cuMemExportToShareableHandle(
                                  &fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  out.kind = GpuExport::Kind::kVmmFd;
  out.fd = ScopedFd(fd);
  out.allocation_base = base;
  out.allocation_size = size;
  return out;
}

}  // namespace

absl::StatusOr<GpuExport> ExportAllocation(uint64_t ptr) {
  GDR_ASSIGN_OR_RETURN(const CudaApi* api, LoadedApi());
  // Only memory mapped through the VMM API has a generic allocation handle.
  CUmemGenericAllocationHandle handle = 0;
  if (api->cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(ptr)) ==
      CUDA_SUCCESS) {
    absl::StatusOr<GpuExport> out = ExportVmm(*api, ptr, handle);
    api->cuMemRelease(handle);  // the reference Retain took; the mapping keeps its own
    return out;
  }
  GDR_ASSIGN_OR_RETURN(const int ordinal, PointerOrdinal(ptr));
  GDR_ASSIGN_OR_RETURN(const AllocationRange range, AllocationOf(ptr));
  GpuExport out;
  GDR_RETURN_IF_ERROR(FillGpu(*api, ordinal, &out));
  GDR_RETURN_IF_ERROR(UseDevice(*api, ordinal));
  out.allocation_base = range.base;
  out.allocation_size = range.size;
  CUipcMemHandle h;
  const CUresult r = api->cuIpcGetMemHandle(&h, range.base);
  if (r != CUDA_SUCCESS) {
    // Stream-ordered pool memory (cudaMallocAsync) and managed memory have no legacy handle.
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU memory ", Where(ptr), " cannot be exported as a CUDA IPC handle (",
        CudaError(*api, r, "cuIpcGetMemHandle", __FILE__, __LINE__).message(),
        "): hand over memory from cuMemAlloc/cudaMalloc, or a VMM allocation made shareable "
        "as a POSIX file descriptor"));
  }
  std::memcpy(out.ipc_handle.data(), &h, kIpcHandleBytes);
  out.kind = GpuExport::Kind::kIpcHandle;
  return out;
}

// ---- ImportedGpuMemory ----

absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> ImportedGpuMemory::OpenIpcHandle(
    const std::array<uint8_t, kIpcHandleBytes>& handle, const std::string& pci,
    size_t allocation_size) {
  GDR_ASSIGN_OR_RETURN(const CudaApi* api, LoadedApi());
  if (allocation_size == 0) {
    return absl::InvalidArgumentError("CUDA IPC import: the allocation size is 0");
  }
  GDR_ASSIGN_OR_RETURN(const int ordinal, OrdinalOf(pci));
  GDR_RETURN_IF_ERROR(UseDevice(*api, ordinal));
  CUipcMemHandle h;
  std::memcpy(&h, handle.data(), kIpcHandleBytes);
  CUdeviceptr p = 0;
  const CUresult r = api->cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  if (r != CUDA_SUCCESS) {
    // The handle came from another process: one that names nothing (freed, made up, from
    // another host or boot) is the caller's error, not ours.
    const absl::StatusCode code = r == CUDA_ERROR_OUT_OF_MEMORY
                                      ? absl::StatusCode::kResourceExhausted
                                      : absl::StatusCode::kInvalidArgument;
    return absl::Status(
        code, absl::StrCat("CUDA IPC handle for GPU ", pci, " does not open here: ",
                           CudaError(*api, r, "cuIpcOpenMemHandle", __FILE__, __LINE__).message(),
                           " (the allocation freed, the exporter gone, or not a handle of this "
                           "host)"));
  }
  std::unique_ptr<ImportedGpuMemory> m(new ImportedGpuMemory());
  m->ptr_ = p;
  m->ordinal_ = ordinal;
  size_t mapped = 0;
  const CUresult sr = api->cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p);
  m->size_ = sr == CUDA_SUCCESS ? mapped : 0;  // the destructor closes it either way
  if (sr != CUDA_SUCCESS) {
    return CudaError(*api, sr, "cuPointerGetAttribute(RANGE_SIZE)", __FILE__, __LINE__);
  }
  if (allocation_size > mapped) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA IPC import: the exporter says its allocation is ", allocation_size,
        " bytes, and the driver mapped ", mapped));
  }
  m->size_ = allocation_size;
  return m;
}

absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> ImportedGpuMemory::ImportVmmFd(
    int fd, const std::string& pci, size_t allocation_size) {
  GDR_ASSIGN_OR_RETURN(const CudaApi* api, LoadedApi());
  if (allocation_size == 0) {
    return absl::InvalidArgumentError("VMM import: the allocation size is 0");
  }
  GDR_ASSIGN_OR_RETURN(const int ordinal, OrdinalOf(pci));
  GDR_RETURN_IF_ERROR(UseDevice(*api, ordinal));
  CUmemGenericAllocationHandle handle = 0;
  CUresult r = api->cuMemImportFromShareableHandle(
      &handle, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (r != CUDA_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the descriptor handed over for GPU ", pci, " is not a VMM allocation's shareable "
        "handle: ", CudaError(*api, r, "cuMemImportFromShareableHandle", __FILE__, __LINE__)
                        .message()));
  }
  // The mapping holds the memory from here on; the handle's own reference goes at return.
  struct Release {
    const CudaApi* api;
    CUmemGenericAllocationHandle h;
    ~Release() { api->cuMemRelease(h); }
  } release{api, handle};
  CUmemAllocationProp prop = {};
  GDR_CU_RETURN_IF_ERROR(*api, cuMemGetAllocationPropertiesFromHandle(&prop, handle));
  size_t granule = 0;
  GDR_CU_RETURN_IF_ERROR(*api, cuMemGetAllocationGranularity(&granule, &prop,
                                                             CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  if (granule == 0 || allocation_size % granule != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "VMM import: the allocation size ", allocation_size,
        " is not a multiple of the allocation granularity ", granule));
  }
  CUdeviceptr va = 0;
  GDR_CU_RETURN_IF_ERROR(*api, cuMemAddressReserve(&va, allocation_size, granule, 0, 0));
  std::unique_ptr<ImportedGpuMemory> m(new ImportedGpuMemory());
  m->ptr_ = va;
  m->ordinal_ = ordinal;
  m->vmm_ = std::make_unique<Vmm>();
  r = api->cuMemMap(va, allocation_size, 0, handle, 0);
  if (r != CUDA_SUCCESS) {
    api->cuMemAddressFree(va, allocation_size);
    m->ptr_ = 0;
    // Most often a size larger than what the exporter allocated.
    return absl::InvalidArgumentError(absl::StrCat(
        "VMM import of ", allocation_size, " bytes on GPU ", pci, ": ",
        CudaError(*api, r, "cuMemMap", __FILE__, __LINE__).message(),
        " (is the size the allocation's?)"));
  }
  m->vmm_->mapped = allocation_size;  // from here the destructor unmaps and frees
  m->size_ = allocation_size;
  GDR_RETURN_IF_ERROR(GrantReadWrite(*api, va, allocation_size, ordinal));
  return m;
}

ImportedGpuMemory::~ImportedGpuMemory() {
  if (ptr_ == 0) return;
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return;
  const CudaApi& api = **loaded;
  if (!UseDevice(api, ordinal_).ok()) return;
  if (vmm_ != nullptr) {
    if (vmm_->mapped == 0) return;
    const CUresult u = api.cuMemUnmap(ptr_, vmm_->mapped);
    if (u != CUDA_SUCCESS) {
      GDR_LOG(kError) << CudaError(api, u, "cuMemUnmap", __FILE__, __LINE__).message();
    }
    const CUresult f = api.cuMemAddressFree(ptr_, vmm_->mapped);
    if (f != CUDA_SUCCESS) {
      GDR_LOG(kError) << CudaError(api, f, "cuMemAddressFree", __FILE__, __LINE__).message();
    }
    return;
  }
  const CUresult r = api.cuIpcCloseMemHandle(ptr_);
  if (r != CUDA_SUCCESS) {
    GDR_LOG(kError) << CudaError(api, r, "cuIpcCloseMemHandle", __FILE__, __LINE__).message();
  }
}

absl::Status ImportedGpuMemory::CopyFromHost(size_t offset, const void* host, size_t n) const {
  if (offset > size_ || n > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat("[", offset, ", +", n, ") is outside the ", size_,
                                              "-byte imported GPU allocation"));
  }
  if (n == 0) return absl::OkStatus();
  GDR_ASSIGN_OR_RETURN(const CudaApi* api, LoadedApi());
  GDR_RETURN_IF_ERROR(UseDevice(*api, ordinal_));
  GDR_CU_RETURN_IF_ERROR(*api, cuMemcpyHtoDAsync(ptr_ + offset, host, n, CU_STREAM_PER_THREAD));
  return Drain(*api);
}

absl::Status ImportedGpuMemory::CopyToHost(size_t offset, void* host, size_t n) const {
  if (offset > size_ || n > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat("[", offset, ", +", n, ") is outside the ", size_,
                                              "-byte imported GPU allocation"));
  }
  if (n == 0) return absl::OkStatus();
  GDR_ASSIGN_OR_RETURN(const CudaApi* api, LoadedApi());
  GDR_RETURN_IF_ERROR(UseDevice(*api, ordinal_));
  GDR_CU_RETURN_IF_ERROR(*api, cuMemcpyDtoHAsync(host, ptr_ + offset, n, CU_STREAM_PER_THREAD));
  return Drain(*api);
}

// ---- ShareableGpuMemory ----

absl::StatusOr<std::unique_ptr<ShareableGpuMemory>> ShareableGpuMemory::Create(int ordinal,
                                                                               size_t bytes) {
  if (bytes == 0) return absl::InvalidArgumentError("GPU buffer size must be > 0");
  GDR_ASSIGN_OR_RETURN(const CudaApi* api, LoadedApi());
  GDR_RETURN_IF_ERROR(UseDevice(*api, ordinal));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  // A NIC may register it (directly, or in the process it is handed to: the agent), which VMM
  // memory allows only when allocated so.
  prop.allocFlags.gpuDirectRDMACapable = 1;
  size_t granule = 0;
  GDR_CU_RETURN_IF_ERROR(*api, cuMemGetAllocationGranularity(&granule, &prop,
                                                             CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  if (granule == 0 || bytes > SIZE_MAX - granule) {
    return absl::InvalidArgumentError(absl::StrCat("GPU buffer size ", bytes, " is too large"));
  }
  const size_t size = (bytes + granule - 1) / granule * granule;
  CUmemGenericAllocationHandle handle = 0;
  GDR_CU_RETURN_IF_ERROR(*api, cuMemCreate(&handle, size, &prop, 0));
  struct Release {
    const CudaApi* api;
    CUmemGenericAllocationHandle h;
    ~Release() { api->cuMemRelease(h); }
  } release{api, handle};
  CUdeviceptr va = 0;
  GDR_CU_RETURN_IF_ERROR(*api, cuMemAddressReserve(&va, size, granule, 0, 0));
  const CUresult r = api->cuMemMap(va, size, 0, handle, 0);
  if (r != CUDA_SUCCESS) {
    api->cuMemAddressFree(va, size);
    return CudaError(*api, r, "cuMemMap", __FILE__, __LINE__);
  }
  std::unique_ptr<ShareableGpuMemory> m(new ShareableGpuMemory());
  m->ptr_ = va;
  m->size_ = size;
  m->ordinal_ = ordinal;
  GDR_RETURN_IF_ERROR(GrantReadWrite(*api, va, size, ordinal));
  return m;
}

ShareableGpuMemory::~ShareableGpuMemory() {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok() || ptr_ == 0) return;
  const CudaApi& api = **loaded;
  if (!UseDevice(api, ordinal_).ok()) return;
  const CUresult u = api.cuMemUnmap(ptr_, size_);
  if (u != CUDA_SUCCESS) {
    GDR_LOG(kError) << CudaError(api, u, "cuMemUnmap", __FILE__, __LINE__).message();
  }
  const CUresult f = api.cuMemAddressFree(ptr_, size_);
  if (f != CUDA_SUCCESS) {
    GDR_LOG(kError) << CudaError(api, f, "cuMemAddressFree", __FILE__, __LINE__).message();
  }
}

// ---- PinnedHostRange ----

absl::StatusOr<std::unique_ptr<PinnedHostRange>> PinnedHostRange::Create(void* p, size_t n,
                                                                          bool read_only) {
  if (p == nullptr || n == 0) {
    return absl::InvalidArgumentError("page-locking host memory needs a pointer and a size > 0");
  }
  GDR_ASSIGN_OR_RETURN(const CudaApi* api, LoadedApi());
  // Registration needs a current context; PORTABLE makes the pages locked for every context.
  GDR_RETURN_IF_ERROR(UseDevice(*api, 0));
  const CUresult r = api->cuMemHostRegister(
      p, n, CU_MEMHOSTREGISTER_PORTABLE | (read_only ? CU_MEMHOSTREGISTER_READ_ONLY : 0));
  if (r != CUDA_SUCCESS) {
    return absl::Status(
        r == CUDA_ERROR_OUT_OF_MEMORY ? absl::StatusCode::kResourceExhausted
                                      : absl::StatusCode::kFailedPrecondition,
        absl::StrCat("page-locking ", n, " bytes of host memory", read_only ? " read-only" : "",
                     " at ",
                     Where(reinterpret_cast<uintptr_t>(p)), ": ",
                     CudaError(*api, r, "cuMemHostRegister", __FILE__, __LINE__).message()));
  }
  return std::unique_ptr<PinnedHostRange>(new PinnedHostRange(p));
}

PinnedHostRange::~PinnedHostRange() {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return;
  const CUresult r = (*loaded)->cuMemHostUnregister(p_);
  if (r != CUDA_SUCCESS) {
    GDR_LOG(kError) << CudaError(**loaded, r, "cuMemHostUnregister", __FILE__, __LINE__).message();
  }
}

}  // namespace gdr::cuda
