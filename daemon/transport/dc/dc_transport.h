// Starting the dc transport inside gdrstored: the decision to offer it (its flags are parsed by
// daemon/ops/dc_flags). dc runs on the daemon's first rail (device port, completion poller,
// registered volumes), with or without rc; it is offered only where the device is mlx5
// (mlx5dv_is_supported) and can create DC initiators, and GetInfo says why not otherwise.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/transport/dc/dc_initiator.h"
#include "daemon/verbs_core/verbs_core.h"

namespace gdr::dc {

struct DcStart {
  std::unique_ptr<DcInitiator> initiator;  // null when dc is not offered
  std::string detail;                      // why dc is absent (GetInfo's line), when it is
};

// Starts dc on `core` (null when no RDMA device is open; `core_detail` then says why).
// Errors only in Mode::kOn: FAILED_PRECONDITION naming the missing capability, or the verbs
// call that failed. In kAuto a device that cannot do DC yields a null initiator and the reason.
absl::StatusOr<DcStart> StartDcTransport(const DcTransportConfig& config, VerbsCore* core,
                                         const std::string& core_detail, uint64_t max_op_bytes,
                                         uint64_t chunk_bytes);

}  // namespace gdr::dc
