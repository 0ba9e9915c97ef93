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
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gdr::tcpwire {

inline constexpr uint32_t kMagic = 0x54524447;  // "GDRT" in little-endian byte order
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderSize = 32;
// Hard ceiling of one frame's payload, whatever the configuration says.
inline constexpr uint32_t kMaxPayload = 64u << 20;

enum class Opcode : uint8_t {
  kWriteReq = 1,   // initiator -> target: place payload at address
  kReadReq = 2,    // initiator -> target: send `length` bytes from address
  kWriteAck = 3,   // target -> initiator
  kReadData = 4,   // target -> initiator
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

// Parses and validates a header: magic, version, opcode, status range, and
// length <= max_payload (itself capped at kMaxPayload). INVALID_ARGUMENT naming the bad field
// otherwise; the caller must then drop the connection (the stream is no longer framed).
absl::StatusOr<Header> Decode(std::span<const std::byte, kHeaderSize> in, uint32_t max_payload);

// Bytes of payload that follow a header on the wire.
uint32_t PayloadBytes(const Header& h);

// True for opcodes a target may receive / an initiator may receive.
inline bool IsRequest(Opcode op) { return op == Opcode::kWriteReq || op == Opcode::kReadReq; }

absl::string_view TargetStatusName(TargetStatus s);

// Maps a target refusal to the status the daemon returns for the op (PERMISSION_DENIED for
// access errors, DATA_LOSS for target-internal failures), message naming rkey and range.
absl::Status TargetStatusToStatus(const Header& response);

}  // namespace gdr::tcpwire
