// One op carried as several pieces (slices) over a transport's rails: every slice submitted at
// once, a slice whose rail failed resubmitted once on the rail the transport reroutes it to,
// and one answer for the op when every slice has answered.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "client/src/transport/client_transport.h"
#include "gdrstore/types.h"

namespace gdr {

// Submits `slice` (offset and length from the op's start, and its rail); `done` runs once.
using SliceSubmit =
    std::function<void(const ClientTransport::Slice& slice, gdrstore::OpCallback done)>;

// Whether a slice that failed with `code` may succeed on another rail: the rail or its link
// failed (UNAVAILABLE, ABORTED, INTERNAL, UNKNOWN), not the request (which would fail there
// too). A transfer to the same bytes is idempotent, so running it twice is safe.
bool RetryOnAnotherRail(absl::StatusCode code);

// Runs `slices` through `submit`; `done` gets the bytes of all slices, the longest service
// time and `synced` only if every slice was; else the first error, naming the slice.
void RunSliced(std::shared_ptr<ClientTransport> transport,
               std::vector<ClientTransport::Slice> slices, SliceSubmit submit,
               gdrstore::OpCallback done);

}  // namespace gdr
