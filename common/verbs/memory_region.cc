#include "common/verbs/memory_region.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/verbs/verbs_status.h"

namespace gdr::verbs {

absl::StatusOr<std::unique_ptr<MemoryRegion>> MemoryRegion::Register(ibv_pd* pd, void* addr,
                                                                     size_t length, int access) {
  if (pd == nullptr || addr == nullptr || length == 0) {
    return absl::InvalidArgumentError("memory registration needs a PD and a non-empty range");
  }
  RelaxedOrdering ro;
  VerbsPtr<ibv_mr> mr(RegisterPreferringRelaxedOrdering(
      [&](int a) { return ibv_reg_mr(pd, addr, length, a); }, access, RelaxedOrderingWanted(),
      &ro));
  if (!mr) {
    const int err = errno;
    const std::string what = absl::StrCat(length, " bytes at 0x", absl::Hex(reinterpret_cast<uintptr_t>(addr)));
    if (err == ENOMEM || err == EPERM) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "ibv_reg_mr of ", what, ": ", strerror(err),
          " (locked-memory limit too low? raise `ulimit -l` / systemd LimitMEMLOCK=infinity)"));
    }
    return VerbsError(err, "ibv_reg_mr", what);
  }
  return std::unique_ptr<MemoryRegion>(new MemoryRegion(std::move(mr), std::move(ro)));
}

bool MemoryRegion::Contains(const void* p, size_t len) const {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto base = reinterpret_cast<uintptr_t>(mr_->addr);
  return a >= base && len <= mr_->length && a - base <= mr_->length - len;
}

}  // namespace gdr::verbs
