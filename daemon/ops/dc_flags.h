// gdrstored's dc flags (--dc, --dci-count, --dc-*): registered on the command line and
// range-checked into the dc transport's settings.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/transport/dc/dc_options.h"

namespace CLI {
class App;
}

namespace gdr {

// Flag values as parsed; FinishDcFlags range-checks them into a dc::DcTransportConfig.
struct DcFlagValues {
  std::string mode = "auto";
  uint32_t dci_count = 16;
  uint32_t sq_depth = 128;
  uint32_t mtu = 0;  // 0: the port's active MTU
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
absl::StatusOr<dc::DcTransportConfig> FinishDcFlags(const DcFlagValues& values);

}  // namespace gdr
