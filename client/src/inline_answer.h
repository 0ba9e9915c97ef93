// A Write the daemon answered inline (TcpEndpoint.inline_max): its bytes came in the answer
// rather than over the tcp target, and go into the op's buffer before the op is done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "gdrstore/client.h"

namespace gdr {

// DATA_LOSS for `bytes` inline bytes in the answer to an op that did not ask for them (a Read,
// a Stream op, a Write sent without TcpEndpoint.inline_max): nothing is copied.
absl::Status UnaskedInlineAnswer(size_t bytes);

// Copies `data`, the answer's bytes, into `buffer` at `offset` (host memory by memcpy, GPU
// memory by the driver). DATA_LOSS, nothing copied, when the op did not ask (`asked` false:
// UnaskedInlineAnswer) or the answer does not carry exactly the op's `length` bytes;
// PERMISSION_DENIED for a read-only buffer, as the target refuses a write into one.
absl::Status TakeInlineAnswer(const gdrstore::Buffer& buffer, size_t offset, uint64_t length,
                              bool asked, const std::string& data);

}  // namespace gdr
