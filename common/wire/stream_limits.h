// Limits of the Stream RPC that the client and the daemon both keep to; the proto
// (gdrstore.v1.StreamRequest) documents them for other clients.
#pragma once

#include <cstddef>

namespace gdr {

// Ops in one StreamRequest: the client packs at most this many, the daemon answers the ops
// past it INVALID_ARGUMENT and packs at most this many answers into one StreamResponse.
inline constexpr int kMaxOpsPerMessage = 1024;

// Inline bytes (StreamResult.data, tcp's inline answers) the daemon packs into one
// StreamResponse before it starts another: far below a client's 4 MiB receive limit.
inline constexpr size_t kMaxInlineBytesPerMessage = size_t{1} << 20;

}  // namespace gdr
