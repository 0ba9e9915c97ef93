// GPUDirect RDMA as one GPU reports it: whether a NIC may reach its memory, and whether bytes a
// NIC writes there are seen in order by later work on the GPU or must be flushed first
// (CUDA's GPU_DIRECT_RDMA_WRITES_ORDERING and cuFlushGPUDirectRDMAWrites). A get on rc/dc
// completes to the caller only after the flush its GPU needs: the write fence built here.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gdr::cuda {

// The values of CUGPUDirectRDMAWritesOrdering.
enum class WritesOrdering {
  kNone = 0,          // later work may miss NIC writes until they are flushed
  kOwner = 100,       // the owning GPU sees NIC writes in order; other GPUs may not
  kAllDevices = 200,  // every GPU sees them in order
};
// Bits of CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS.
inline constexpr int kFlushOptionHost = 1;    // cuFlushGPUDirectRDMAWrites works
inline constexpr int kFlushOptionMemOps = 2;  // stream memory-op flushes work

// Read once per GPU with cuDeviceGetAttribute.
struct GpuDirectAttributes {
  bool rdma_supported = false;  // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
  int writes_ordering = 0;      // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING (raw)
  int flush_options = 0;        // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS
  bool dma_buf = false;         // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
};

// What a get into this GPU's memory needs before the caller may use the bytes.
enum class WriteVisibility {
  kInOrder,      // nothing: the owner already sees NIC writes in order
  kFlushHost,    // cuFlushGPUDirectRDMAWrites(current context, to owner) after each get
  kNoGuarantee,  // ordering none and no host flush: the driver offers no way to make sure
};
WriteVisibility VisibilityFor(const GpuDirectAttributes& a);
const char* WriteVisibilityName(WriteVisibility v);  // "in order", "flush", "no guarantee"
// "ordering owner (100), flush options host+memops, dma-buf yes: gets need no flush".
std::string DescribeGpuDirect(const GpuDirectAttributes& a);

// The attributes of GPU `ordinal`, read on first use and cached for the process. Thread-safe.
// FAILED_PRECONDITION without a driver or CUDA support in this build; the driver's error for
// a bad ordinal.
absl::StatusOr<GpuDirectAttributes> ReadGpuDirectAttributes(int ordinal);

// cuFlushGPUDirectRDMAWrites(TARGET_CURRENT_CTX, TO_OWNER) with GPU `ordinal`'s primary
// context current: returns once every NIC write already made into that GPU's memory is
// visible to work the GPU does next. Thread-safe; blocks briefly.
absl::Status FlushGpuDirectWrites(int ordinal);

// The CUDA calls a write fence needs; tests replace them (no GPU here).
struct GpuDirectOps {
  std::function<absl::StatusOr<GpuDirectAttributes>(int ordinal)> attributes;
  std::function<absl::Status(int ordinal)> flush;
};
GpuDirectOps RealGpuDirectOps();

// What must run after a NIC wrote into GPU `ordinal`'s memory and before the op is reported
// done: empty when nothing is needed (kInOrder), or when nothing can be done (kNoGuarantee, which
// is logged once per GPU and shown by `gdrctl doctor`); otherwise a call of `ops.flush`.
// The attributes' error when they cannot be read.
absl::StatusOr<std::function<absl::Status()>> WriteFenceFor(int ordinal,
                                                            const GpuDirectOps& ops);

}  // namespace gdr::cuda
