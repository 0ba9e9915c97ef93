#include "daemon/service/inflight_limiter.h"

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_status.h"

namespace gdr {

absl::Status InflightLimiter::TryAcquire(uint64_t bytes, Permit* permit) {
  const uint32_t max_ops = max_ops_.load(std::memory_order_relaxed);
  const uint64_t max_bytes = max_bytes_.load(std::memory_order_relaxed);
  if (ops_.fetch_add(1, std::memory_order_relaxed) >= max_ops) {
    ops_.fetch_sub(1, std::memory_order_relaxed);
    return NotAdmittedError(
        absl::StrCat("daemon has ", max_ops, " ops in flight (max_inflight_ops); retry later"));
  }
  const uint64_t before = bytes_.fetch_add(bytes, std::memory_order_relaxed);
  // A single op larger than the byte budget is admitted when nothing else is in flight, so
  // max_inflight_bytes below max_op_bytes cannot starve it forever.
  if (before != 0 && before + bytes > max_bytes) {
    bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    ops_.fetch_sub(1, std::memory_order_relaxed);
    return NotAdmittedError(absl::StrCat("daemon has ", before,
                                                     " bytes in flight (max_inflight_bytes ",
                                                     max_bytes, "); retry later"));
  }
  *permit = Permit(this, bytes);
  return absl::OkStatus();
}

}  // namespace gdr
