// Test helpers of the handoff suites: sealed memfds the way a client library makes them, and
// the bytes a test peer writes, so a server-side check knows what to expect.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "common/base/socket.h"

namespace gdr::handoff::test {

// Byte `i` of region `region` as handoff_peer writes it.
inline uint8_t PeerByte(uint32_t region, uint64_t i) {
  return static_cast<uint8_t>(i * 7 + (i >> 9) * 3 + region * 13 + 1);
}

// A memfd of `size` bytes mapped read-write here (unmapped on destruction), sealed against
// shrinking unless `seal` is false.
struct SealedMemfd {
  ScopedFd fd;
  uint8_t* bytes = nullptr;
  size_t size = 0;
  SealedMemfd() = default;
  SealedMemfd(SealedMemfd&& o) noexcept;
  SealedMemfd& operator=(SealedMemfd&&) = delete;
  ~SealedMemfd();
};
absl::StatusOr<SealedMemfd> MakeSealedMemfd(size_t size, bool seal = true);

}  // namespace gdr::handoff::test
