// AsyncCopier for builds without the CUDA Toolkit: nothing can be copied to a GPU.
#include "absl/strings/str_cat.h"
#include "common/cuda/async_copy.h"

namespace gdr::cuda {
namespace {
absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      "this build has no GPU support (configured without the CUDA Toolkit; rebuild with "
      "-DGDR_WITH_CUDA=ON)");
}
}  // namespace

AsyncCopier::AsyncCopier(int slots) : slots_(static_cast<size_t>(slots > 0 ? slots : 1)) {}
AsyncCopier::~AsyncCopier() = default;
absl::Status AsyncCopier::StartToDevice(int, int, uint64_t, const void*, size_t) {
  return NoCuda();
}
absl::Status AsyncCopier::StartToHost(int, int, void*, uint64_t, size_t) { return NoCuda(); }
absl::Status AsyncCopier::Wait(int) { return absl::OkStatus(); }
absl::Status AsyncCopier::Start(int, int, bool, uint64_t, void*, size_t) { return NoCuda(); }

}  // namespace gdr::cuda
