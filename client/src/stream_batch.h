// A bench knob kept off the public headers: how many ops a Stream packs into one request
// message (issue 45: whether splitting a Stream's batch of resubmitted ops into groups that
// overlap beats one message per batch), and a count of the messages Streams wrote, so a run
// shows the split it got. Process-wide, for `gdrctl bench` and gdr_bench.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace gdr {

// At most `ops` ops per StreamRequest for the Streams opened after the call, and a group of
// `ops` ops submitted from an answer's callbacks leaves as soon as it is complete (and no write
// is outstanding) rather than after all of that answer's callbacks. 0: no cap of its own
// (kMaxOpsPerMessage), the default. INVALID_ARGUMENT above kMaxOpsPerMessage.
absl::Status SetStreamBatch(size_t ops);
size_t StreamBatch();

// StreamRequest messages every Stream of this process has written.
uint64_t StreamMessagesSoFar();

}  // namespace gdr
