// The rc transport's settings as plain values: what the daemon's configuration fills in and
// reload compares, kept apart from the transport's code so neither has to include the other.
// The rails (devices) and their pollers are the verbs core's
// (daemon/verbs_core/verbs_core_options.h).
#pragma once

#include <cstdint>

#include "absl/time/time.h"
#include "common/verbs/rc_qp.h"

namespace gdr {

struct RcInitiatorOptions {
  uint32_t max_qps = 256;            // RC QPs per rail, all clients
  uint32_t max_qps_per_client = 4;   // per Connect call
  verbs::RcQpConfig qp;              // sq_depth, rd_atomic, timeouts
  uint64_t chunk_bytes = 1 << 20;    // capped at the port's max message size
  uint32_t max_backlog = 8192;       // chunks queued per connection
  absl::Duration reset_timeout = absl::Seconds(10);  // client must answer RcResetQp within
};

}  // namespace gdr
