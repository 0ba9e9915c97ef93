#include "common/cuda/gpu_direct.h"

#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"

#if GDR_HAVE_CUDA
#include "common/cuda/context.h"
#include "common/cuda/cuda_api.h"
#endif

namespace gdr::cuda {

WriteVisibility VisibilityFor(const GpuDirectAttributes& a) {
  if (a.writes_ordering >= static_cast<int>(WritesOrdering::kOwner)) {
    return WriteVisibility::kInOrder;
  }
  if (a.flush_options & kFlushOptionHost) return WriteVisibility::kFlushHost;
  return WriteVisibility::kNoGuarantee;
}

const char* WriteVisibilityName(WriteVisibility v) {
  switch (v) {
    case WriteVisibility::kInOrder: return "in order";
    case WriteVisibility::kFlushHost: return "flush";
    case WriteVisibility::kNoGuarantee: return "no guarantee";
  }
  return "?";
}

namespace {

std::string OrderingName(int v) {
  switch (v) {
    case static_cast<int>(WritesOrdering::kNone): return "none (0)";
    case static_cast<int>(WritesOrdering::kOwner): return "owner (100)";
    case static_cast<int>(WritesOrdering::kAllDevices): return "all devices (200)";
  }
  return absl::StrCat("unknown (", v, ")");
}

std::string FlushOptionsName(int v) {
  std::string s;
  if (v & kFlushOptionHost) s = "host";
  if (v & kFlushOptionMemOps) absl::StrAppend(&s, s.empty() ? "" : "+", "memops");
  return s.empty() ? "none" : s;
}

}  // namespace

std::string DescribeGpuDirect(const GpuDirectAttributes& a) {
  std::string effect;
  switch (VisibilityFor(a)) {
    case WriteVisibility::kInOrder: effect = "gets need no flush"; break;
    case WriteVisibility::kFlushHost: effect = "each get is flushed (cuFlushGPUDirectRDMAWrites)";
      break;
    case WriteVisibility::kNoGuarantee:
      effect = "the driver offers no flush: bytes a NIC wrote may be seen late by GPU work";
      break;
  }
  return absl::StrCat("GPUDirect RDMA ", a.rdma_supported ? "yes" : "no", ", writes ordering ",
                      OrderingName(a.writes_ordering), ", flush options ",
                      FlushOptionsName(a.flush_options), ", dma-buf ", a.dma_buf ? "yes" : "no",
                      ": ", effect);
}

absl::StatusOr<std::function<absl::Status()>> WriteFenceFor(int ordinal,
                                                            const GpuDirectOps& ops) {
  absl::StatusOr<GpuDirectAttributes> a = ops.attributes(ordinal);
  if (!a.ok()) return a.status();
  switch (VisibilityFor(*a)) {
    case WriteVisibility::kInOrder:
      return std::function<absl::Status()>();
    case WriteVisibility::kFlushHost:
      return std::function<absl::Status()>([ordinal, flush = ops.flush] { return flush(ordinal); });
    case WriteVisibility::kNoGuarantee: {
      static std::mutex mu;
      static auto* warned = new std::map<int, bool>();
      std::lock_guard<std::mutex> lock(mu);
      if (!(*warned)[ordinal]) {
        (*warned)[ordinal] = true;
        GDR_LOG(kWarning) << "GPU " << ordinal << ": " << DescribeGpuDirect(*a);
      }
      return std::function<absl::Status()>();
    }
  }
  return absl::InternalError("unknown write visibility");
}

#if GDR_HAVE_CUDA

absl::StatusOr<GpuDirectAttributes> ReadGpuDirectAttributes(int ordinal) {
  static std::mutex mu;
  static auto* cache = new std::map<int, GpuDirectAttributes>();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache->find(ordinal); it != cache->end()) return it->second;
  }
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  CUdevice dev = 0;
  GDR_CU_RETURN_IF_ERROR(api, cuDeviceGet(&dev, ordinal));
  // An attribute the driver does not know reads as 0 (unsupported / no ordering): the safe side.
  auto attr = [&](CUdevice_attribute which) {
    int v = 0;
    return api.cuDeviceGetAttribute(&v, which, dev) == CUDA_SUCCESS ? v : 0;
  };
  GpuDirectAttributes a;
  a.rdma_supported = attr(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED) != 0;
  a.writes_ordering = attr(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING);
  a.flush_options = attr(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS);
  a.dma_buf = attr(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED) != 0;
  std::lock_guard<std::mutex> lock(mu);
  cache->emplace(ordinal, a);
  return a;
}

absl::Status FlushGpuDirectWrites(int ordinal) {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  if (absl::Status s = UseDevice(api, ordinal); !s.ok()) return s;
  GDR_CU_RETURN_IF_ERROR(api, cuFlushGPUDirectRDMAWrites(
                                  CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                  CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER));
  return absl::OkStatus();
}

#else  // !GDR_HAVE_CUDA

namespace {
absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      "this build has no GPU support (configured without the CUDA Toolkit)");
}
}  // namespace
absl::StatusOr<GpuDirectAttributes> ReadGpuDirectAttributes(int) { return NoCuda(); }
absl::Status FlushGpuDirectWrites(int) { return NoCuda(); }

#endif  // GDR_HAVE_CUDA

GpuDirectOps RealGpuDirectOps() {
  GpuDirectOps ops;
  ops.attributes = [](int ordinal) { return ReadGpuDirectAttributes(ordinal); };
  ops.flush = [](int ordinal) { return FlushGpuDirectWrites(ordinal); };
  return ops;
}

}  // namespace gdr::cuda
