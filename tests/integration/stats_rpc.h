// GetStats over a client's own channel (its token and TLS settings), as the integration tests
// read the daemon's counters.
#pragma once

#include "absl/status/statusor.h"
#include "gdrstore/client.h"

namespace gdr::integ {

// The RPC's status, as an absl::Status, when the call fails.
absl::StatusOr<gdrstore::v1::GetStatsResponse> GetStats(gdrstore::Client& client);

}  // namespace gdr::integ
