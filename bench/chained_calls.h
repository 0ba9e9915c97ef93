// Calls back to back at queue depth 1, the next issued from the previous one's completion, as
// RunBench chains unary ops: the loop behind gdr_bench's Ping baselines (the daemon's and a bare
// gRPC server's), timed the same way for both.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gdrbench {

// `ops` calls of `call`, which starts one and calls its argument once with the outcome (from
// any thread). Each call's latency, ns, or the first failure. Every call must carry a deadline
// of its own: this waits for the last one's outcome.
absl::StatusOr<std::vector<uint64_t>> ChainedCalls(
    uint64_t ops, const std::function<void(std::function<void(absl::Status)>)>& call);

}  // namespace gdrbench
