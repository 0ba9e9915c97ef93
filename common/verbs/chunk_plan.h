// How one transfer is cut into work requests: pieces of at most `max_chunk` bytes (the smaller
// of the configured chunk size and the port's max message size), in order.
#pragma once

#include <cstdint>
#include <vector>

namespace gdr::verbs {

struct Chunk {
  uint64_t offset = 0;  // from the start of the transfer
  uint32_t length = 0;
};

// Effective chunk size: min(configured, port max message size, 2 GiB - 1 since an SGE length is
// 32 bits), never 0.
uint64_t EffectiveChunkBytes(uint64_t configured, uint64_t port_max_msg);

// Pieces covering [0, length). Empty for length 0. `max_chunk` must be > 0.
std::vector<Chunk> PlanChunks(uint64_t length, uint64_t max_chunk);

}  // namespace gdr::verbs
