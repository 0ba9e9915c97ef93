#include "common/cuda/async_copy.h"

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/cuda/context.h"
#include "common/cuda/cuda_api.h"

namespace gdr::cuda {

AsyncCopier::AsyncCopier(int slots) : slots_(static_cast<size_t>(slots > 0 ? slots : 1)) {}

AsyncCopier::~AsyncCopier() {
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return;
  const CudaApi& api = **loaded;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (absl::Status w = Wait(static_cast<int>(s)); !w.ok()) {
      GDR_LOG(kWarning) << "staged copy in flight at its thread's end: " << w.message();
    }
  }
  for (auto& [ordinal, events] : events_) {
    if (!UseDevice(api, ordinal).ok()) continue;
    for (void* e : events) {
      if (e != nullptr) api.cuEventDestroy(static_cast<CUevent>(e));
    }
  }
}

absl::Status AsyncCopier::StartToDevice(int slot, int ordinal, uint64_t dptr, const void* host,
                                        size_t n) {
  return Start(slot, ordinal, /*to_device=*/true, dptr, const_cast<void*>(host), n);
}

absl::Status AsyncCopier::StartToHost(int slot, int ordinal, void* host, uint64_t dptr,
                                      size_t n) {
  return Start(slot, ordinal, /*to_device=*/false, dptr, host, n);
}

absl::Status AsyncCopier::Start(int slot, int ordinal, bool to_device, uint64_t dptr, void* host,
                                size_t n) {
  if (slot < 0 || static_cast<size_t>(slot) >= slots_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("copy slot ", slot, " is not in 0..",
                                                   slots_.size() - 1));
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.pending) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy slot ", slot, " still has a copy in flight"));
  }
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  GDR_RETURN_IF_ERROR(UseDevice(api, ordinal));
  std::vector<void*>& events = events_[ordinal];
  if (events.empty()) events.assign(slots_.size(), nullptr);
  if (events[slot] == nullptr) {
    CUevent e = nullptr;
    GDR_CU_RETURN_IF_ERROR(api, cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    events[slot] = e;
  }
  if (to_device) {
    GDR_CU_RETURN_IF_ERROR(api, cuMemcpyHtoDAsync(dptr, host, n, CU_STREAM_PER_THREAD));
  } else {
    GDR_CU_RETURN_IF_ERROR(api, cuMemcpyDtoHAsync(host, dptr, n, CU_STREAM_PER_THREAD));
  }
  GDR_CU_RETURN_IF_ERROR(
      api, cuEventRecord(static_cast<CUevent>(events[slot]), CU_STREAM_PER_THREAD));
  s.ordinal = ordinal;
  s.pending = true;
  return absl::OkStatus();
}

absl::Status AsyncCopier::Wait(int slot) {
  if (slot < 0 || static_cast<size_t>(slot) >= slots_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("copy slot ", slot, " is not in 0..",
                                                   slots_.size() - 1));
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (!s.pending) return absl::OkStatus();
  s.pending = false;  // waited for once, whatever it says
  absl::StatusOr<const CudaApi*> loaded = Api();
  if (!loaded.ok()) return loaded.status();
  const CudaApi& api = **loaded;
  GDR_RETURN_IF_ERROR(UseDevice(api, s.ordinal));
  GDR_CU_RETURN_IF_ERROR(api,
                         cuEventSynchronize(static_cast<CUevent>(events_[s.ordinal][slot])));
  return absl::OkStatus();
}

}  // namespace gdr::cuda
