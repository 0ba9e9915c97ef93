// TEMPORARY (issue 31, branch handoff): placeholders for common/cuda/gpu_ipc.h until the real
// gpu_ipc.cc (branch localdaemon) lands; every call answers FAILED_PRECONDITION. Dropped at
// merge together with its target_sources line in common/cuda/CMakeLists.txt.
#include "common/cuda/gpu_ipc.h"

namespace gdr::cuda {
namespace {
absl::Status NotBuilt() { return absl::FailedPreconditionError("GPU import not built yet"); }
}  // namespace

struct ImportedGpuMemory::Vmm {};

absl::StatusOr<GpuExport> ExportAllocation(uint64_t) { return NotBuilt(); }

absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> ImportedGpuMemory::OpenIpcHandle(
    const std::array<uint8_t, kIpcHandleBytes>&, const std::string&, size_t) {
  return NotBuilt();
}

absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> ImportedGpuMemory::ImportVmmFd(
    int, const std::string&, size_t) {
  return NotBuilt();
}

ImportedGpuMemory::~ImportedGpuMemory() = default;

absl::Status ImportedGpuMemory::CopyFromHost(size_t, const void*, size_t) const {
  return NotBuilt();
}

absl::Status ImportedGpuMemory::CopyToHost(size_t, void*, size_t) const { return NotBuilt(); }

absl::StatusOr<std::unique_ptr<PinnedHostRange>> PinnedHostRange::Create(void*, size_t) {
  return NotBuilt();
}

PinnedHostRange::~PinnedHostRange() { (void)p_; }  // nothing was locked

}  // namespace gdr::cuda
