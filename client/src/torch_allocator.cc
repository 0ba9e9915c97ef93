// PyTorch's pluggable allocator hooks (gdrstore_torch_alloc / gdrstore_torch_free in the C ABI;
// gdrstore.torch.memory_pool builds a torch.cuda.MemPool on them). Each allocation is VMM memory
// made shareable as a POSIX fd and GPUDirect-RDMA capable (cuda::ShareableGpuMemory), so a
// tensor in it is handed to a daemon or the agent as a descriptor, which crosses IPC and PID
// namespaces, and a NIC registers it by dma-buf. The live ones are kept in a table keyed by
// address: a free of anything else is refused, never released twice.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/log.h"
#include "common/cuda/gpu.h"
#include "common/cuda/gpu_ipc.h"
#include "gdrstore/gdrstore.h"

namespace gdr {
namespace {

std::string Hex(uint64_t p) { return absl::StrCat("0x", absl::Hex(p)); }

// The process's allocations made for PyTorch. Thread-safe: PyTorch calls from any thread.
class TorchAllocations {
 public:
  // Device memory of at least `size` bytes on GPU `device`, or nullptr with the reason logged
  // (the first time it is given; PyTorch retries after freeing its cache, and a loop probing
  // for the largest batch that fits would repeat it at every step).
  void* Allocate(size_t size, int device) {
    if (size == 0) return nullptr;  // what PyTorch expects for an empty allocation
    if (device < 0) {
      LogFailure(absl::StrCat("device ", device, " is not a CUDA ordinal (0 or more)"));
      return nullptr;
    }
    const cuda::CurrentContextKeeper keep;  // the caller's current device survives this
    absl::StatusOr<std::unique_ptr<cuda::ShareableGpuMemory>> mem =
        cuda::ShareableGpuMemory::Create(device, size);
    if (!mem.ok()) {
      LogFailure(absl::StrCat("GPU ", device, ": ", mem.status().message()));
      return nullptr;
    }
    const uint64_t ptr = (*mem)->ptr();
    absl::MutexLock lock(&mu_);
    live_.emplace(ptr, *std::move(mem));
    return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
  }

  // Releases what Allocate returned, once the GPU's queued work is done with it. A pointer it
  // did not return, or returned and freed already, is logged and left alone.
  void Free(void* p, size_t size, int device) {
    if (p == nullptr) return;  // Allocate's answer for 0 bytes
    const uint64_t ptr = reinterpret_cast<uintptr_t>(p);
    std::unique_ptr<cuda::ShareableGpuMemory> mem;
    {
      absl::MutexLock lock(&mu_);
      auto it = live_.find(ptr);
      if (it != live_.end()) {
        mem = std::move(it->second);
        live_.erase(it);
      }
    }
    if (mem == nullptr) {
      GDR_LOG(kError) << "gdrstore_torch_free(" << Hex(ptr) << ", " << size << " bytes, device "
                      << device << "): not memory gdrstore_torch_alloc handed out, or freed "
                      << "already; left alone";
      return;
    }
    if (device != mem->ordinal() || size > mem->size()) {
      GDR_LOG(kWarning) << "gdrstore_torch_free(" << Hex(ptr) << "): told " << size
                        << " bytes on device " << device << ", allocated " << mem->size()
                        << " on device " << mem->ordinal() << "; freeing the allocation";
    }
    const cuda::CurrentContextKeeper keep;
    // Unmapping does not wait for kernels still using the memory, as cudaFree does.
    // At exit PyTorch may free after the context went (its memory with it): nothing to wait for.
    if (absl::Status s = cuda::SynchronizeDevice(mem->ordinal());
        !s.ok() && !absl::StrContains(s.message(), "CUDA_ERROR_CONTEXT_IS_DESTROYED") &&
        !absl::StrContains(s.message(), "CUDA_ERROR_DEINITIALIZED")) {
      GDR_LOG(kError) << "gdrstore_torch_free(" << Hex(ptr) << "): waiting for GPU "
                      << mem->ordinal() << " before the release: " << s.message();
    }
    mem.reset();
  }

 private:
  void LogFailure(std::string why) {
    {
      absl::MutexLock lock(&mu_);
      if (why == last_failure_) return;
      last_failure_ = why;
    }
    GDR_LOG(kWarning) << "gdrstore_torch_alloc: no memory for PyTorch: " << why;
  }

  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<cuda::ShareableGpuMemory>> live_
      ABSL_GUARDED_BY(mu_);
  std::string last_failure_ ABSL_GUARDED_BY(mu_);  // the reason logged last
};

// Never destroyed: PyTorch may free from its own static destructors at exit.
TorchAllocations& Allocations() {
  static TorchAllocations* const allocations = new TorchAllocations();
  return *allocations;
}

}  // namespace
}  // namespace gdr

extern "C" {

GDRSTORE_EXPORT void* gdrstore_torch_alloc(size_t size, int device, void* /*stream*/) {
  try {
    return gdr::Allocations().Allocate(size, device);
  } catch (const std::exception& e) {  // no exception crosses into PyTorch
    GDR_LOG(kError) << "gdrstore_torch_alloc(" << size << ", device " << device
                    << "): " << e.what();
    return nullptr;
  } catch (...) {
    return nullptr;
  }
}

GDRSTORE_EXPORT void gdrstore_torch_free(void* ptr, size_t size, int device, void* /*stream*/) {
  try {
    gdr::Allocations().Free(ptr, size, device);
  } catch (const std::exception& e) {
    GDR_LOG(kError) << "gdrstore_torch_free(" << ptr << "): " << e.what();
  } catch (...) {
  }
}

}  // extern "C"
