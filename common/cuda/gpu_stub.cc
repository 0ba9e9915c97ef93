// GPU support for builds without the CUDA Toolkit (GDR_WITH_CUDA=OFF or not found): every entry
// point answers FAILED_PRECONDITION, so host memory keeps working and --gpu says why it cannot.
#include "absl/strings/str_cat.h"
#include "common/cuda/async_copy.h"
#include "common/cuda/gpu.h"
#include "common/cuda/gpu_ipc.h"
#include "common/cuda/gpu_select.h"
#include "common/cuda/staging_pipe.h"
#include "common/base/status_macros.h"

namespace gdr::cuda {
namespace {
absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      "this build has no GPU support (configured without the CUDA Toolkit; rebuild with "
      "-DGDR_WITH_CUDA=ON)");
}
}  // namespace

bool BuiltWithCuda() { return false; }
absl::Status DriverStatus() { return NoCuda(); }
absl::StatusOr<std::vector<GpuInfo>> ListGpus() { return NoCuda(); }
absl::StatusOr<RetainedContexts> RetainContexts() { return NoCuda(); }
absl::StatusOr<GpuInfo> FindGpu(absl::string_view spec) {
  GDR_RETURN_IF_ERROR(ValidateGpuSpec(spec));
  return absl::FailedPreconditionError(absl::StrCat("GPU '", spec, "': ", NoCuda().message()));
}

absl::StatusOr<std::unique_ptr<DeviceMemory>> DeviceMemory::Create(int, size_t) {
  return NoCuda();
}
absl::StatusOr<std::unique_ptr<DeviceMemory>> DeviceMemory::Borrow(uint64_t, size_t) {
  return NoCuda();
}
DeviceMemory::~DeviceMemory() = default;
absl::Status DeviceMemory::CopyFromHost(size_t, const void*, size_t) const { return NoCuda(); }
absl::Status DeviceMemory::CopyToHost(size_t, void*, size_t) const { return NoCuda(); }
absl::Status DeviceMemory::Memset(uint8_t) const { return NoCuda(); }

absl::StatusOr<std::unique_ptr<PinnedMemory>> PinnedMemory::Create(size_t) { return NoCuda(); }
PinnedMemory::~PinnedMemory() = default;

absl::StatusOr<AllocationRange> AllocationOf(uint64_t) { return NoCuda(); }
absl::StatusOr<DmaBuf> DmaBufFd(uint64_t, size_t) { return NoCuda(); }
absl::StatusOr<int> PointerOrdinal(uint64_t) { return NoCuda(); }
CurrentContextKeeper::CurrentContextKeeper() = default;
CurrentContextKeeper::~CurrentContextKeeper() = default;
absl::Status SynchronizeDevice(int) { return NoCuda(); }

struct StagingPipe::Slot {};
StagingPipe::StagingPipe(int ordinal, size_t slot_bytes)
    : ordinal_(ordinal), slot_bytes_(slot_bytes) {}
StagingPipe::~StagingPipe() = default;
absl::StatusOr<std::unique_ptr<StagingPipe>> StagingPipe::Create(int, size_t, int) {
  return NoCuda();
}
StagingPipe::Result StagingPipe::ToDevice(uint64_t, size_t,
                                          absl::FunctionRef<absl::Status(std::byte*, size_t)>) {
  return Result{absl::OkStatus(), NoCuda(), false};
}
StagingPipe::Result StagingPipe::FromDevice(
    uint64_t, size_t, absl::FunctionRef<absl::Status()>,
    absl::FunctionRef<absl::Status(const std::byte*, size_t)>) {
  return Result{absl::OkStatus(), NoCuda(), false};
}
absl::Status StagingPipe::Sync() { return absl::OkStatus(); }
bool StagingPipe::busy() const { return false; }

absl::StatusOr<GpuExport> ExportRange(uint64_t, uint64_t, size_t) { return NoCuda(); }
absl::StatusOr<GpuExport> ExportAllocation(uint64_t) { return NoCuda(); }
struct ImportedGpuMemory::Vmm {};
absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> ImportedGpuMemory::OpenIpcHandle(
    const std::array<uint8_t, kIpcHandleBytes>&, const std::string&, size_t) {
  return NoCuda();
}
absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> ImportedGpuMemory::ImportVmmFd(
    int, const std::string&, size_t) {
  return NoCuda();
}
absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> ImportedGpuMemory::ImportVmmChunks(
    const std::vector<VmmChunk>&, const std::string&, size_t) {
  return NoCuda();
}
ImportedGpuMemory::~ImportedGpuMemory() = default;
absl::Status ImportedGpuMemory::CopyFromHost(size_t, const void*, size_t) const {
  return NoCuda();
}
absl::Status ImportedGpuMemory::CopyToHost(size_t, void*, size_t) const { return NoCuda(); }
absl::StatusOr<std::unique_ptr<PinnedHostRange>> PinnedHostRange::Create(void*, size_t, bool) {
  return NoCuda();
}
PinnedHostRange::~PinnedHostRange() = default;
absl::StatusOr<std::unique_ptr<ShareableGpuMemory>> ShareableGpuMemory::Create(int, size_t) {
  return NoCuda();
}
ShareableGpuMemory::~ShareableGpuMemory() = default;

AsyncCopier::AsyncCopier(int slots) : slots_(static_cast<size_t>(slots > 0 ? slots : 1)) {}
AsyncCopier::~AsyncCopier() = default;
absl::Status AsyncCopier::StartToDevice(int, int, uint64_t, const void*, size_t) {
  return NoCuda();
}
absl::Status AsyncCopier::StartToHost(int, int, void*, uint64_t, size_t) { return NoCuda(); }
absl::Status AsyncCopier::Wait(int) { return absl::OkStatus(); }
absl::Status AsyncCopier::Start(int, int, bool, uint64_t, void*, size_t) { return NoCuda(); }

}  // namespace gdr::cuda
