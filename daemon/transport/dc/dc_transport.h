// Starting the dc transport inside gdrstored: the decision to offer it (its flags are parsed by
// daemon/ops/dc_flags). dc runs on the rc transport's device port, completion poller and
// registered volumes (one verbs core per device); it is offered only where the device is mlx5
// (mlx5dv_is_supported) and can create DC initiators, and GetInfo says why not otherwise.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/transport/dc/dc_initiator.h"

namespace gdr {
class RcInitiator;
}

namespace gdr::dc {

struct DcStart {
  std::unique_ptr<DcInitiator> initiator;  // null when dc is not offered
  std::string detail;                      // GetInfo's line: what runs, or why dc is absent
};

// Starts dc on `rc`'s device (null when rc is not running; `rc_detail` then says why).
// Errors only in Mode::kOn: FAILED_PRECONDITION naming the missing capability, or the verbs
// call that failed. In kAuto a device that cannot do DC yields a null initiator and the reason.
absl::StatusOr<DcStart> StartDcTransport(const DcTransportConfig& config, RcInitiator* rc,
                                         const std::string& rc_detail, uint64_t max_op_bytes,
                                         uint64_t chunk_bytes);

}  // namespace gdr::dc
