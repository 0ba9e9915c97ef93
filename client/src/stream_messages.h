// A count of the request messages this process's Streams wrote, kept off the public headers:
// `gdrctl bench` and gdr_bench print it beside a Stream's rate, so a run shows how its ops were
// packed (StreamOptions::max_ops_per_message).
#pragma once

#include <cstdint>

namespace gdr {

// StreamRequest messages every Stream of this process has written.
uint64_t StreamMessagesSoFar();

}  // namespace gdr
