#include "common/cuda/gpu_ipc.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/cuda/allocation_span.h"
#include "common/cuda/context.h"
#include "common/cuda/cuda_api.h"
#include "common/cuda/gpu.h"
#include "common/cuda/gpu_select.h"

namespace gdr::cuda {

static_assert(sizeof(CUipcMemHandle) == kIpcHandleBytes, "CUipcMemHandle changed size");

// A VMM import: the generic handle is released once mapped (the mapping holds the memory);
// what is left to undo is the mapping and the address reservation.
struct ImportedGpuMemory::Vmm {
  size_t reserved = 0;               // bytes of address range reserved at ptr_
  std::vector<uint64_t> mapped;      // each chunk mapped there, in order from ptr_
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

// Generic allocation handles this scope holds a reference to, released at its end (a mapping
// made from one keeps a reference of its own).
class HeldHandles {
 public:
  explicit HeldHandles(const CudaApi& api) : api_(api) {}
  HeldHandles(const CudaApi& api, CUmemGenericAllocationHandle h) : api_(api) { Add(h); }
  ~HeldHandles() {
    for (const CUmemGenericAllocationHandle h : held_) api_.cuMemRelease(h);
  }
  HeldHandles(const HeldHandles&) = delete;
  HeldHandles& operator=(const HeldHandles&) = delete;
  void Add(CUmemGenericAllocationHandle h) { held_.push_back(h); }
  CUmemGenericAllocationHandle operator[](size_t i) const { return held_[i]; }

 private:
  const CudaApi& api_;
  std::vector<CUmemGenericAllocationHandle> held_;
};

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

// What holds `address`, as the driver says: a VMM allocation (it has a generic handle; its
// mapping is the one cuMemMap made, which maps whole allocations), else a cudaMalloc one.
absl::StatusOr<AllocationAt> FindWithDriver(const CudaApi& api, uint64_t address) {
  CUmemGenericAllocationHandle handle = 0;
  if (api.cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(address)) ==
      CUDA_SUCCESS) {
    const HeldHandles retained(api, handle);
    CUmemAllocationProp prop = {};
    GDR_CU_RETURN_IF_ERROR(api, cuMemGetAllocationPropertiesFromHandle(&prop, handle));
    if (prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
      return absl::FailedPreconditionError(absl::StrCat(
          "GPU memory ", Where(address), " is a VMM allocation that does not live on a GPU"));
    }
    AllocationAt a;
    a.kind = AllocationKind::kVmm;
    a.ordinal = prop.location.id;
    GDR_RETURN_IF_ERROR(UseDevice(api, a.ordinal));
    CUdeviceptr base = 0;
    size_t size = 0;
    GDR_CU_RETURN_IF_ERROR(api, cuMemGetAddressRange(&base, &size, address));
    a.base = base;
    a.size = size;
    return a;
  }
  GDR_ASSIGN_OR_RETURN(const int ordinal, PointerOrdinal(address));
  GDR_ASSIGN_OR_RETURN(const AllocationRange range, AllocationOf(address));
  return AllocationAt{AllocationKind::kCudaMalloc, range.base, range.size, ordinal};
}

// The VMM allocation mapped at `base` as a POSIX fd.
absl::StatusOr<ScopedFd> ExportVmmChunk(const CudaApi& api, uint64_t base) {
  CUmemGenericAllocationHandle handle = 0;
  GDR_CU_RETURN_IF_ERROR(api, cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(base)));
  const HeldHandles retained(api, handle);
  CUmemAllocationProp prop = {};
  GDR_CU_RETURN_IF_ERROR(api, cuMemGetAllocationPropertiesFromHandle(&prop, handle));
  if ((prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "GPU memory ", Where(base), " is a VMM allocation (cuMemCreate) that was not made "
        "shareable: create it with CUmemAllocationProp.requestedHandleTypes including "
        "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR to hand it to another process (PyTorch: "
        "gdrstore.torch.memory_pool)"));
  }
  int fd = -1;
  GDR_CU_RETURN_IF_ERROR(api, cuMemExportToShareableHandle(
                                  &fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  return ScopedFd(fd);
}

}  // namespace

absl::StatusOr<GpuExport> ExportRange(uint64_t ptr, uint64_t n, size_t max_chunks) {
  GDR_ASSIGN_OR_RETURN(const CudaApi* api, LoadedApi());
  // The calls below make the memory's GPU current; the caller's current device (PyTorch's, on
  // a host with several GPUs) is put back.
  CurrentContextKeeper keep;
  GDR_ASSIGN_OR_RETURN(
      std::vector<AllocationAt> pieces,
      AllocationsOfRange(
          ptr, n, [api](uint64_t at) { return FindWithDriver(*api, at); }, max_chunks));
  const AllocationAt& first = pieces.front();
  GpuExport out;
  GDR_RETURN_IF_ERROR(FillGpu(*api, first.ordinal, &out));
  GDR_RETURN_IF_ERROR(UseDevice(*api, first.ordinal));
  out.allocation_base = first.base;
  if (first.kind == AllocationKind::kVmm) {
    out.kind = GpuExport::Kind::kVmmFd;
    uint64_t total = 0;
    for (const AllocationAt& a : pieces) {
      GDR_ASSIGN_OR_RETURN(ScopedFd fd, ExportVmmChunk(*api, a.base));
      out.chunks.push_back(ExportedChunk{std::move(fd), a.size});
      total += a.size;
    }
    out.allocation_size = total;
    return out;
  }
  out.allocation_size = first.size;
  CUipcMemHandle h;
  const CUresult r = api->cuIpcGetMemHandle(&h, first.base);
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

absl::StatusOr<GpuExport> ExportAllocation(uint64_t ptr) { return ExportRange(ptr, 1, 1); }

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
    // The driver finds the exporter by its pid: from a sibling PID namespace (an agent pod
    // without host PID) every handle fails so.
    const char* why = r == CUDA_ERROR_INVALID_CONTEXT
                          ? " (a CUDA IPC handle opens only in the exporter's PID namespace or an "
                            "ancestor of it: run this process in the host's PID namespace, or hand "
                            "over VMM memory, e.g. gdrstore.torch.memory_pool, which needs none)"
                          : " (the allocation freed, the exporter gone, or not a handle of this "
                            "host)";
    return absl::Status(
        code, absl::StrCat("CUDA IPC handle for GPU ", pci, " does not open here: ",
                           CudaError(*api, r, "cuIpcOpenMemHandle", __FILE__, __LINE__).message(),
                           why));
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
  return ImportVmmChunks({VmmChunk{fd, allocation_size}}, pci, allocation_size);
}

absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> ImportedGpuMemory::ImportVmmChunks(
    const std::vector<VmmChunk>& chunks, const std::string& pci, size_t allocation_size) {
  GDR_ASSIGN_OR_RETURN(const CudaApi* api, LoadedApi());
  if (allocation_size == 0 || chunks.empty()) {
    return absl::InvalidArgumentError("VMM import: the allocation size is 0");
  }
  GDR_ASSIGN_OR_RETURN(const int ordinal, OrdinalOf(pci));
  GDR_RETURN_IF_ERROR(UseDevice(*api, ordinal));
  const bool several = chunks.size() > 1;
  auto which = [&](size_t i) {
    return several ? absl::StrCat("chunk ", i, " of ", chunks.size(), ": ") : std::string();
  };
  // Every chunk imported first (the handles keep the memory until mapped), so that the range
  // can be reserved with the coarsest granularity any of them needs.
  HeldHandles handles(*api);
  size_t align = 0;
  uint64_t sum = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    CUmemGenericAllocationHandle handle = 0;
    const CUresult r = api->cuMemImportFromShareableHandle(
        &handle, reinterpret_cast<void*>(static_cast<uintptr_t>(chunks[i].fd)),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r != CUDA_SUCCESS) {
      return absl::InvalidArgumentError(absl::StrCat(
          which(i), "the descriptor handed over for GPU ", pci,
          " is not a VMM allocation's shareable handle: ",
          CudaError(*api, r, "cuMemImportFromShareableHandle", __FILE__, __LINE__).message()));
    }
    handles.Add(handle);
    CUmemAllocationProp prop = {};
    GDR_CU_RETURN_IF_ERROR(*api, cuMemGetAllocationPropertiesFromHandle(&prop, handle));
    size_t granule = 0;
    GDR_CU_RETURN_IF_ERROR(*api, cuMemGetAllocationGranularity(
                                     &granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (granule == 0 || chunks[i].size % granule != 0 || sum % granule != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "VMM import: ", which(i), chunks[i].size, " bytes at +", sum,
          " is not a multiple of the allocation granularity ", granule));
    }
    align = std::max(align, granule);
    if (chunks[i].size > UINT64_MAX - sum) {
      return absl::InvalidArgumentError("VMM import: the chunks' sizes overflow");
    }
    sum += chunks[i].size;
  }
  if (sum != allocation_size) {
    return absl::InvalidArgumentError(absl::StrCat("VMM import: the chunks hold ", sum,
                                                   " bytes, the region says ", allocation_size));
  }
  CUdeviceptr va = 0;
  GDR_CU_RETURN_IF_ERROR(*api, cuMemAddressReserve(&va, allocation_size, align, 0, 0));
  std::unique_ptr<ImportedGpuMemory> m(new ImportedGpuMemory());
  m->ptr_ = va;
  m->ordinal_ = ordinal;
  m->vmm_ = std::make_unique<Vmm>();
  m->vmm_->reserved = allocation_size;  // from here the destructor unmaps and frees
  uint64_t at = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const CUresult r = api->cuMemMap(va + at, chunks[i].size, 0, handles[i], 0);
    if (r != CUDA_SUCCESS) {
      // Most often a size larger than what the exporter allocated.
      return absl::InvalidArgumentError(absl::StrCat(
          "VMM import: ", which(i), chunks[i].size, " bytes on GPU ", pci, ": ",
          CudaError(*api, r, "cuMemMap", __FILE__, __LINE__).message(),
          " (is the size the allocation's?)"));
    }
    m->vmm_->mapped.push_back(chunks[i].size);
    at += chunks[i].size;
  }
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
    if (vmm_->reserved == 0) return;
    uint64_t at = 0;
    for (const uint64_t size : vmm_->mapped) {
      const CUresult u = api.cuMemUnmap(ptr_ + at, size);
      if (u != CUDA_SUCCESS) {
        GDR_LOG(kError) << CudaError(api, u, "cuMemUnmap", __FILE__, __LINE__).message();
      }
      at += size;
    }
    const CUresult f = api.cuMemAddressFree(ptr_, vmm_->reserved);
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
  const HeldHandles created(*api, handle);
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
