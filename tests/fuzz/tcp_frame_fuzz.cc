// Fuzzes the tcp transport's wire codec (common/tcp_frame.h) the way a link reads it: a buffer
// of back-to-back frames, each a 32-byte header and its payload, decoded until the first
// header that does not parse (where a real reader drops the connection) or the bytes run out.
//
// Input: byte 0 picks the receiver's payload cap (the daemon's chunk size or the target's
// kMaxPayload); the rest is the byte stream. Properties: a decoded header re-encodes to exactly
// the bytes it came from, its payload fits the cap, and a response maps to OK iff its status is.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "common/tcp_frame.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace wire = gdr::tcpwire;

constexpr uint32_t kCaps[] = {wire::kMaxPayload, 1u << 20, 4096, 0, UINT32_MAX, 64u << 10,
                              1,                 32};

void CheckFrame(const wire::Header& h, std::span<const std::byte, wire::kHeaderSize> raw,
                uint32_t cap) {
  std::array<std::byte, wire::kHeaderSize> again;
  wire::Encode(h, again);
  GDR_FUZZ_CHECK(std::memcmp(again.data(), raw.data(), wire::kHeaderSize) == 0);
  const uint32_t payload = wire::PayloadBytes(h);
  GDR_FUZZ_CHECK(payload <= h.length);
  GDR_FUZZ_CHECK(payload <= cap && payload <= wire::kMaxPayload);
  GDR_FUZZ_CHECK(!wire::TargetStatusName(h.status).empty());
  if (wire::IsRequest(h.opcode)) {
    GDR_FUZZ_CHECK(h.status == wire::TargetStatus::kOk);
  } else {
    GDR_FUZZ_CHECK(wire::TargetStatusToStatus(h).ok() == (h.status == wire::TargetStatus::kOk));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint32_t cap = kCaps[data[0] % (sizeof(kCaps) / sizeof(kCaps[0]))];
  std::span<const std::byte> stream(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  while (stream.size() >= wire::kHeaderSize) {
    std::span<const std::byte, wire::kHeaderSize> raw = stream.first<wire::kHeaderSize>();
    absl::StatusOr<wire::Header> h = wire::Decode(raw, cap);
    if (!h.ok()) {
      GDR_FUZZ_CHECK(absl::IsInvalidArgument(h.status()));
      return 0;  // a reader drops the connection here
    }
    CheckFrame(*h, raw, cap);
    stream = stream.subspan(wire::kHeaderSize);
    const uint32_t payload = wire::PayloadBytes(*h);
    if (payload > stream.size()) return 0;  // the reader would wait for more bytes
    stream = stream.subspan(payload);
  }
  return 0;
}
