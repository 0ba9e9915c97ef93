#include "common/cuda/cuda_api.h"

#include <dlfcn.h>

#include <mutex>

#include "absl/strings/str_cat.h"

namespace gdr::cuda {
namespace {

absl::StatusOr<const CudaApi*> Load() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = ::dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "no NVIDIA driver on this host: cannot load libcuda.so.1 (",
        err ? err : "unknown dlopen error",
        "); install the NVIDIA driver for GPU memory, or use host memory"));
  }
  // Never dlclose'd: the driver keeps threads and state for the life of the process.
  using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t,
                               CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProc>(::dlsym(lib, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    return absl::FailedPreconditionError(
        "the NVIDIA driver is too old: libcuda.so.1 has no cuGetProcAddress_v2 (CUDA 12.0 or "
        "newer driver required)");
  }
  auto* api = new CudaApi();  // lives for the process
  absl::Status missing;
  auto resolve = [&](const char* name, void** fn) {
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    const CUresult r = get_proc(name, fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &q);
    if ((r != CUDA_SUCCESS || *fn == nullptr) && missing.ok()) {
      missing = absl::FailedPreconditionError(absl::StrCat(
          "the NVIDIA driver lacks ", name, " (query result ", static_cast<int>(q),
          "); a driver supporting CUDA ", CUDA_VERSION / 1000, ".", (CUDA_VERSION % 1000) / 10,
          " API entry points is required"));
    }
  };
#define GDR_CUDA_RESOLVE(name) resolve(#name, reinterpret_cast<void**>(&api->name));
  GDR_CUDA_RESOLVE(cuInit)
  GDR_CUDA_RESOLVE(cuDriverGetVersion)
  GDR_CUDA_RESOLVE(cuGetErrorName)
  GDR_CUDA_RESOLVE(cuGetErrorString)
  GDR_CUDA_RESOLVE(cuDeviceGetCount)
  GDR_CUDA_RESOLVE(cuDeviceGet)
  GDR_CUDA_RESOLVE(cuDeviceGetName)
  GDR_CUDA_RESOLVE(cuDeviceGetPCIBusId)
  GDR_CUDA_RESOLVE(cuDeviceTotalMem)
  GDR_CUDA_RESOLVE(cuDeviceGetAttribute)
  GDR_CUDA_RESOLVE(cuDevicePrimaryCtxRetain)
  GDR_CUDA_RESOLVE(cuDevicePrimaryCtxRelease)
  GDR_CUDA_RESOLVE(cuCtxSetCurrent)
  GDR_CUDA_RESOLVE(cuCtxGetCurrent)
  GDR_CUDA_RESOLVE(cuCtxSynchronize)
  GDR_CUDA_RESOLVE(cuMemAlloc)
  GDR_CUDA_RESOLVE(cuMemFree)
  GDR_CUDA_RESOLVE(cuMemHostAlloc)
  GDR_CUDA_RESOLVE(cuMemFreeHost)
  GDR_CUDA_RESOLVE(cuMemcpyHtoD)
  GDR_CUDA_RESOLVE(cuMemcpyDtoH)
  GDR_CUDA_RESOLVE(cuMemcpyHtoDAsync)
  GDR_CUDA_RESOLVE(cuMemcpyDtoHAsync)
  GDR_CUDA_RESOLVE(cuMemsetD8)
  GDR_CUDA_RESOLVE(cuStreamCreate)
  GDR_CUDA_RESOLVE(cuStreamDestroy)
  GDR_CUDA_RESOLVE(cuStreamSynchronize)
  GDR_CUDA_RESOLVE(cuEventCreate)
  GDR_CUDA_RESOLVE(cuEventDestroy)
  GDR_CUDA_RESOLVE(cuEventRecord)
  GDR_CUDA_RESOLVE(cuEventSynchronize)
  GDR_CUDA_RESOLVE(cuEventQuery)
  GDR_CUDA_RESOLVE(cuEventElapsedTime)
  GDR_CUDA_RESOLVE(cuPointerSetAttribute)
  GDR_CUDA_RESOLVE(cuPointerGetAttribute)
  GDR_CUDA_RESOLVE(cuMemGetHandleForAddressRange)
  GDR_CUDA_RESOLVE(cuFlushGPUDirectRDMAWrites)
  GDR_CUDA_RESOLVE(cuIpcGetMemHandle)
  GDR_CUDA_RESOLVE(cuIpcOpenMemHandle)
  GDR_CUDA_RESOLVE(cuIpcCloseMemHandle)
  GDR_CUDA_RESOLVE(cuMemRetainAllocationHandle)
  GDR_CUDA_RESOLVE(cuMemRelease)
  GDR_CUDA_RESOLVE(cuMemCreate)
  GDR_CUDA_RESOLVE(cuMemExportToShareableHandle)
  GDR_CUDA_RESOLVE(cuMemImportFromShareableHandle)
  GDR_CUDA_RESOLVE(cuMemGetAllocationPropertiesFromHandle)
  GDR_CUDA_RESOLVE(cuMemGetAllocationGranularity)
  GDR_CUDA_RESOLVE(cuMemAddressReserve)
  GDR_CUDA_RESOLVE(cuMemAddressFree)
  GDR_CUDA_RESOLVE(cuMemMap)
  GDR_CUDA_RESOLVE(cuMemUnmap)
  GDR_CUDA_RESOLVE(cuMemSetAccess)
  GDR_CUDA_RESOLVE(cuMemGetAddressRange)
  GDR_CUDA_RESOLVE(cuMemHostRegister)
  GDR_CUDA_RESOLVE(cuMemHostUnregister)
#undef GDR_CUDA_RESOLVE
  if (!missing.ok()) return missing;
  const CUresult r = api->cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    const char* text = nullptr;
    api->cuGetErrorName(r, &name);
    api->cuGetErrorString(r, &text);
    return absl::FailedPreconditionError(
        absl::StrCat("the NVIDIA driver is loaded but cuInit failed: ", name ? name : "?", " (",
                     text ? text : "?", ")"));
  }
  api->cuDriverGetVersion(&api->driver_version);
  return api;
}

}  // namespace

absl::StatusOr<const CudaApi*> Api() {
  static absl::StatusOr<const CudaApi*>* loaded = [] {
    return new absl::StatusOr<const CudaApi*>(Load());
  }();
  return *loaded;
}

absl::Status CudaError(const CudaApi& api, CUresult r, const char* call, const char* file,
                       int line) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(r, &text);
  const char* base = file;
  for (const char* p = file; *p; ++p)
    if (*p == '/') base = p + 1;
  const absl::StatusCode code = r == CUDA_ERROR_OUT_OF_MEMORY ? absl::StatusCode::kResourceExhausted
                                                              : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(call, ": ", name ? name : "CUDA error",
                                         " (", text ? text : "unknown", ") at ", base, ":", line));
}

}  // namespace gdr::cuda
