// Wire codec of the tcp transport, the software stand-in for one-sided RDMA. The daemon (the
// initiator) sends request frames to a client's target; the target answers each request, in
// order, with one response frame. Every frame starts with a fixed 32-byte little-endian header:
//
//   magic u32 "GDRT" | version u8 | opcode u8 | status u16 | rkey u32 | length u32 |
//   address u64 | tag u64
//
// WRITE_REQ is followed by `length` payload bytes (bytes to place at address); READ_REQ has no
// payload; WRITE_ACK has none; READ_DATA carries `length` bytes when status == kOk, none
// otherwise. `tag` is the initiator's, echoed unchanged.
//
// Before any request, a link is proved (common/wire/tcp_proof.h): the TARGET speaks first with
// HELLO, the initiator answers CHALLENGE, the target answers PROOF. Each of these is a header
// with length 32, every other field zero, and 32 body bytes: HELLO and CHALLENGE carry a fresh
// nonce each, PROOF an HMAC-SHA256. A peer that is not a target therefore gets no byte at all
// from the initiator, and no request frame leaves before the proof has been checked.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gdr::tcpwire {

inline constexpr uint32_t kMagic = 0x54524447;  // "GDRT" in little-endian byte order
// 2: links open with the HELLO / CHALLENGE / PROOF exchange.
inline constexpr uint8_t kVersion = 2;
inline constexpr size_t kHeaderSize = 32;
// Hard ceiling of one frame's payload, whatever the configuration says.
inline constexpr uint32_t kMaxPayload = 64u << 20;
// Bounds of the piece size a client may ask for (TcpEndpoint.chunk_bytes): its GPU staging slot.
inline constexpr uint32_t kMinAskedChunk = 64u << 10;
inline constexpr uint32_t kMaxAskedChunk = 16u << 20;
inline constexpr bool IsAskableChunk(uint64_t bytes) {
  return bytes >= kMinAskedChunk && bytes <= kMaxAskedChunk;
}

enum class Opcode : uint8_t {
  kWriteReq = 1,   // initiator -> target: place payload at address
  kReadReq = 2,    // initiator -> target: send `length` bytes from address
  kWriteAck = 3,   // target -> initiator
  kReadData = 4,   // target -> initiator
  // The proof exchange that opens every link; never valid after it (Decode refuses them).
  kHello = 5,      // target -> initiator, first frame on the link: the target's nonce
  kChallenge = 6,  // initiator -> target: the initiator's nonce
  kProof = 7,      // target -> initiator: HMAC-SHA256 over both nonces, keyed by the secret
};

// What a target answers; mirrors the remote errors of RDMA.
enum class TargetStatus : uint16_t {
  kOk = 0,
  kBadRkey = 1,        // no region registered under rkey (remote access error)
  kOutOfBounds = 2,    // [address, address+length) not inside the region
  kAccessDenied = 3,   // region does not allow this direction
  kInternal = 4,       // target could not complete (e.g. a copy into device memory failed)
};

struct Header {
  Opcode opcode = Opcode::kWriteReq;
  TargetStatus status = TargetStatus::kOk;
  uint32_t rkey = 0;
  uint32_t length = 0;
  uint64_t address = 0;
  uint64_t tag = 0;
};

// Serialises `h` into exactly kHeaderSize bytes.
void Encode(const Header& h, std::span<std::byte, kHeaderSize> out);

// Parses and validates a request/response header (handshake opcodes are refused): magic,
// version, opcode, status range, and
// length <= max_payload (itself capped at kMaxPayload). INVALID_ARGUMENT naming the bad field
// otherwise; the caller must then drop the connection (the stream is no longer framed).
absl::StatusOr<Header> Decode(std::span<const std::byte, kHeaderSize> in, uint32_t max_payload);

inline constexpr size_t kHandshakeBodySize = 32;
inline constexpr size_t kHandshakeFrameSize = kHeaderSize + kHandshakeBodySize;
using HandshakeBody = std::array<std::byte, kHandshakeBodySize>;

// Serialises a HELLO, CHALLENGE or PROOF frame (header + body) into exactly
// kHandshakeFrameSize bytes. `opcode` must be one of those three.
void EncodeHandshake(Opcode opcode, const HandshakeBody& body,
                     std::span<std::byte, kHandshakeFrameSize> out);

// Parses a handshake frame that must be `expected`: magic, version, opcode, then status, rkey,
// address and tag 0 and length 32. A pure function of the bytes; INVALID_ARGUMENT naming what
// is wrong otherwise (the caller drops the connection).
absl::StatusOr<HandshakeBody> DecodeHandshake(std::span<const std::byte, kHandshakeFrameSize> in,
                                              Opcode expected);

absl::string_view OpcodeName(Opcode op);

// Bytes of payload that follow a header on the wire.
uint32_t PayloadBytes(const Header& h);

// True for opcodes a target may receive / an initiator may receive.
inline bool IsRequest(Opcode op) { return op == Opcode::kWriteReq || op == Opcode::kReadReq; }

absl::string_view TargetStatusName(TargetStatus s);

// Maps a target refusal to the status the daemon returns for the op (PERMISSION_DENIED for
// access errors, DATA_LOSS for target-internal failures), message naming rkey and range.
absl::Status TargetStatusToStatus(const Header& response);

}  // namespace gdr::tcpwire
