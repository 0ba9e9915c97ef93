// Fuzzes the tcp transport's wire codec (common/wire/tcp_frame.h) the way a link reads it: first the
// proof exchange's frames (DecodeHandshake), then back-to-back frames, each a 32-byte header
// and its payload, decoded until the first header that does not parse (where a real reader
// drops the connection) or the bytes run out.
//
// Input: byte 0 bits 0-2 pick the receiver's payload cap (the daemon's chunk size or the
// target's kMaxPayload); bit 7 set opens the link with the exchange as one side reads it (bit 3
// clear: the initiator, HELLO then PROOF; set: the target, CHALLENGE); the rest is the byte
// stream. Properties: DecodeHandshake accepts exactly the bytes EncodeHandshake makes for the
// opcode it expects (so a body re-encodes to the same 64 bytes), never another opcode's frame,
// and Decode refuses every handshake frame; a decoded header re-encodes to exactly the bytes
// it came from, its payload fits the cap, and a response maps to OK iff its status is.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "common/wire/tcp_frame.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

namespace wire = gdr::tcpwire;

constexpr uint32_t kCaps[] = {wire::kMaxPayload, 1u << 20, 4096, 0, UINT32_MAX, 64u << 10,
                              1,                 32};
constexpr wire::Opcode kHandshakeOps[] = {wire::Opcode::kHello, wire::Opcode::kChallenge,
                                          wire::Opcode::kProof};

void CheckFrame(const wire::Header& h, std::span<const std::byte, wire::kHeaderSize> raw,
                uint32_t cap) {
  std::array<std::byte, wire::kHeaderSize> again;
  wire::Encode(h, again);
  GDR_FUZZ_CHECK(std::memcmp(again.data(), raw.data(), wire::kHeaderSize) == 0);
  GDR_FUZZ_CHECK(h.opcode != wire::Opcode::kHello && h.opcode != wire::Opcode::kChallenge &&
                 h.opcode != wire::Opcode::kProof);
  const uint32_t payload = wire::PayloadBytes(h);
  GDR_FUZZ_CHECK(payload <= h.length);
  GDR_FUZZ_CHECK(payload <= cap && payload <= wire::kMaxPayload);
  GDR_FUZZ_CHECK(!wire::TargetStatusName(h.status).empty());
  GDR_FUZZ_CHECK(!wire::OpcodeName(h.opcode).empty());
  if (wire::IsRequest(h.opcode)) {
    GDR_FUZZ_CHECK(h.status == wire::TargetStatus::kOk);
  } else {
    GDR_FUZZ_CHECK(wire::TargetStatusToStatus(h).ok() == (h.status == wire::TargetStatus::kOk));
  }
}

// DecodeHandshake(raw, expected) against the one encoding of its body; true when accepted.
bool CheckHandshake(std::span<const std::byte, wire::kHandshakeFrameSize> raw,
                    wire::Opcode expected) {
  absl::StatusOr<wire::HandshakeBody> body = wire::DecodeHandshake(raw, expected);
  wire::HandshakeBody raw_body;
  std::memcpy(raw_body.data(), raw.data() + wire::kHeaderSize, wire::kHandshakeBodySize);
  std::array<std::byte, wire::kHandshakeFrameSize> canonical;
  wire::EncodeHandshake(expected, raw_body, canonical);
  const bool is_canonical =
      std::memcmp(canonical.data(), raw.data(), wire::kHandshakeFrameSize) == 0;
  GDR_FUZZ_CHECK(body.ok() == is_canonical);
  if (!body.ok()) {
    GDR_FUZZ_CHECK(absl::IsInvalidArgument(body.status()));
    GDR_FUZZ_CHECK(!body.status().message().empty());
    return false;
  }
  GDR_FUZZ_CHECK(*body == raw_body);
  for (wire::Opcode other : kHandshakeOps) {
    if (other != expected) GDR_FUZZ_CHECK(!wire::DecodeHandshake(raw, other).ok());
  }
  // After the exchange the same bytes are no frame: a peer cannot replay one as a request.
  for (uint32_t cap : kCaps) {
    GDR_FUZZ_CHECK(!wire::Decode(raw.first<wire::kHeaderSize>(), cap).ok());
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t selector = data[0];
  const uint32_t cap = kCaps[selector % (sizeof(kCaps) / sizeof(kCaps[0]))];
  std::span<const std::byte> stream(reinterpret_cast<const std::byte*>(data) + 1, size - 1);

  // Whatever the mode, the first 64 bytes as each handshake frame.
  if (stream.size() >= wire::kHandshakeFrameSize) {
    int accepted = 0;
    for (wire::Opcode op : kHandshakeOps) {
      accepted += CheckHandshake(stream.first<wire::kHandshakeFrameSize>(), op) ? 1 : 0;
    }
    GDR_FUZZ_CHECK(accepted <= 1);
  }
  if ((selector & 0x80) != 0) {
    const bool initiator = (selector & 0x08) == 0;
    const wire::Opcode initiator_reads[] = {wire::Opcode::kHello, wire::Opcode::kProof};
    const wire::Opcode target_reads[] = {wire::Opcode::kChallenge};
    std::span<const wire::Opcode> expected =
        initiator ? std::span<const wire::Opcode>(initiator_reads)
                  : std::span<const wire::Opcode>(target_reads);
    for (wire::Opcode op : expected) {
      if (stream.size() < wire::kHandshakeFrameSize) return 0;  // waits for the rest
      if (!CheckHandshake(stream.first<wire::kHandshakeFrameSize>(), op)) return 0;  // drops
      stream = stream.subspan(wire::kHandshakeFrameSize);
    }
  }
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
