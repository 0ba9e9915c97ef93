// The CUDA driver API, loaded at run time: libcuda.so.1 is dlopen'ed on first use and every entry
// point is resolved through cuGetProcAddress, so binaries start (and host memory works) on hosts
// with no NVIDIA driver. Private to common/cuda; only built when the toolkit's headers exist.
#pragma once

#include <cuda.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gdr::cuda {

// Function pointers of the driver entry points the project uses. Immutable once loaded;
// thread-safe to call through.
struct CudaApi {
#define GDR_CUDA_FN(name) decltype(&::name) name = nullptr;
  GDR_CUDA_FN(cuInit)
  GDR_CUDA_FN(cuDriverGetVersion)
  GDR_CUDA_FN(cuGetErrorName)
  GDR_CUDA_FN(cuGetErrorString)
  GDR_CUDA_FN(cuDeviceGetCount)
  GDR_CUDA_FN(cuDeviceGet)
  GDR_CUDA_FN(cuDeviceGetName)
  GDR_CUDA_FN(cuDeviceGetPCIBusId)
  GDR_CUDA_FN(cuDeviceTotalMem)
  GDR_CUDA_FN(cuDeviceGetAttribute)
  GDR_CUDA_FN(cuDevicePrimaryCtxRetain)
  GDR_CUDA_FN(cuDevicePrimaryCtxRelease)
  GDR_CUDA_FN(cuCtxSetCurrent)
  GDR_CUDA_FN(cuCtxGetCurrent)
  GDR_CUDA_FN(cuCtxSynchronize)
  GDR_CUDA_FN(cuMemAlloc)
  GDR_CUDA_FN(cuMemFree)
  GDR_CUDA_FN(cuMemHostAlloc)
  GDR_CUDA_FN(cuMemFreeHost)
  GDR_CUDA_FN(cuMemcpyHtoD)
  GDR_CUDA_FN(cuMemcpyDtoH)
  GDR_CUDA_FN(cuMemcpyHtoDAsync)
  GDR_CUDA_FN(cuMemcpyDtoHAsync)
  GDR_CUDA_FN(cuMemsetD8)
  GDR_CUDA_FN(cuStreamCreate)
  GDR_CUDA_FN(cuStreamDestroy)
  GDR_CUDA_FN(cuStreamSynchronize)
  GDR_CUDA_FN(cuEventCreate)
  GDR_CUDA_FN(cuEventDestroy)
  GDR_CUDA_FN(cuEventRecord)
  GDR_CUDA_FN(cuEventSynchronize)
  GDR_CUDA_FN(cuEventQuery)
  GDR_CUDA_FN(cuEventElapsedTime)
  GDR_CUDA_FN(cuPointerSetAttribute)
  GDR_CUDA_FN(cuPointerGetAttribute)
  GDR_CUDA_FN(cuMemGetHandleForAddressRange)
  GDR_CUDA_FN(cuFlushGPUDirectRDMAWrites)
  // GPU memory across processes (gpu_ipc.cc); cuIpcOpenMemHandle, cuMemGetAddressRange and
  // cuMemHostRegister resolve to their _v2 entry points (cuda.h's macros; cuGetProcAddress
  // gives the version of CUDA_VERSION).
  GDR_CUDA_FN(cuIpcGetMemHandle)
  GDR_CUDA_FN(cuIpcOpenMemHandle)
  GDR_CUDA_FN(cuIpcCloseMemHandle)
  GDR_CUDA_FN(cuMemRetainAllocationHandle)
  GDR_CUDA_FN(cuMemRelease)
  GDR_CUDA_FN(cuMemCreate)
  GDR_CUDA_FN(cuMemExportToShareableHandle)
  GDR_CUDA_FN(cuMemImportFromShareableHandle)
  GDR_CUDA_FN(cuMemGetAllocationPropertiesFromHandle)
  GDR_CUDA_FN(cuMemGetAllocationGranularity)
  GDR_CUDA_FN(cuMemAddressReserve)
  GDR_CUDA_FN(cuMemAddressFree)
  GDR_CUDA_FN(cuMemMap)
  GDR_CUDA_FN(cuMemUnmap)
  GDR_CUDA_FN(cuMemSetAccess)
  GDR_CUDA_FN(cuMemGetAddressRange)
  GDR_CUDA_FN(cuMemHostRegister)
  GDR_CUDA_FN(cuMemHostUnregister)
#undef GDR_CUDA_FN
  int driver_version = 0;  // e.g. 13000
};

// Loads the driver once per process (thread-safe) and calls cuInit(0). FAILED_PRECONDITION that
// says what is missing (no libcuda.so.1, driver too old, cuInit's error such as "no CUDA-capable
// device") otherwise. The result, success or failure, is cached.
absl::StatusOr<const CudaApi*> Api();

// "cuMemAlloc(&p, 4096): CUDA_ERROR_OUT_OF_MEMORY (out of memory) at gpu.cc:42".
absl::Status CudaError(const CudaApi& api, CUresult r, const char* call, const char* file,
                       int line);

}  // namespace gdr::cuda

// Returns a Status naming the call, the error and file:line when a driver call fails. `api` is a
// `const CudaApi&` (or pointer dereference) in scope at the call site.
#define GDR_CU_RETURN_IF_ERROR(api, call)                                              \
  do {                                                                                \
    const CUresult gdr_cu_r_ = (api).call;                                             \
    if (gdr_cu_r_ != CUDA_SUCCESS)                                                     \
      return ::gdr::cuda::CudaError((api), gdr_cu_r_, #call, __FILE__, __LINE__);      \
  } while (0)
