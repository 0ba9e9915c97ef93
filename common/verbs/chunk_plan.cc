#include "common/verbs/chunk_plan.h"

#include <algorithm>

namespace gdr::verbs {

uint64_t EffectiveChunkBytes(uint64_t configured, uint64_t port_max_msg) {
  uint64_t c = configured == 0 ? UINT64_MAX : configured;
  if (port_max_msg != 0) c = std::min(c, port_max_msg);
  c = std::min<uint64_t>(c, 0x7fffffffu);
  return std::max<uint64_t>(c, 1);
}

std::vector<Chunk> PlanChunks(uint64_t length, uint64_t max_chunk) {
  std::vector<Chunk> out;
  if (length == 0 || max_chunk == 0) return out;
  out.reserve((length + max_chunk - 1) / max_chunk);
  for (uint64_t off = 0; off < length; off += max_chunk) {
    out.push_back({off, static_cast<uint32_t>(std::min(max_chunk, length - off))});
  }
  return out;
}

}  // namespace gdr::verbs
