// Starting the dc transport inside gdrstored: its flags (--dc, --dci-count, ...), and the
// decision to offer it. dc runs on the rc transport's device port, completion poller and
// registered volumes (one verbs core per device); it is offered only where the device is mlx5
// (mlx5dv_is_supported) and can create DC initiators, and GetInfo says why not otherwise.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/dc/dc_initiator.h"

namespace CLI {
class App;
}

namespace gdr {
class RcInitiator;
}

namespace gdr::dc {

struct DcTransportConfig {
  // kAuto: offered when the device can; kOn: a device that cannot is fatal at start; kOff.
  enum class Mode { kAuto, kOn, kOff };
  Mode mode = Mode::kAuto;
  DcInitiatorOptions options;
};

// Flag values as parsed; FinishDcFlags range-checks them into a DcTransportConfig.
struct DcFlagValues {
  std::string mode = "auto";
  uint32_t dci_count = 16;
  uint32_t sq_depth = 128;
  uint32_t max_rd_atomic = 16;
  uint32_t timeout = 14;
  uint32_t retry_cnt = 7;
  uint32_t rnr_retry = 7;
  uint32_t log_streams = 4;
  uint32_t log_errored = 2;
  uint32_t hop_limit = 64;
  uint32_t traffic_class = 0;
  uint32_t service_level = 0;
  uint32_t flow_label = 0;
  uint32_t ah_cache = 1024;
  uint32_t spread = 4;
};

// Registers --dc and the --dci-*/--dc-* options on `app`, writing into `values`.
void AddDcFlags(CLI::App& app, DcFlagValues* values);
// INVALID_ARGUMENT naming the flag for an out-of-range value.
absl::StatusOr<DcTransportConfig> FinishDcFlags(const DcFlagValues& values);

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
