#include "common/wire/tcp_frame.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gdr::tcpwire {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "wire headers are little-endian");

template <typename T>
void Put(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
T Get(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

void Encode(const Header& h, std::span<std::byte, kHeaderSize> out) {
  std::byte* p = out.data();
  Put<uint32_t>(p + 0, kMagic);
  Put<uint8_t>(p + 4, kVersion);
  Put<uint8_t>(p + 5, static_cast<uint8_t>(h.opcode));
  Put<uint16_t>(p + 6, static_cast<uint16_t>(h.status));
  Put<uint32_t>(p + 8, h.rkey);
  Put<uint32_t>(p + 12, h.length);
  Put<uint64_t>(p + 16, h.address);
  Put<uint64_t>(p + 24, h.tag);
}

// The first 5 bytes of every frame, op or handshake: whether the peer speaks this wire at all.
static absl::Status CheckMagicAndVersion(const std::byte* p) {
  const uint32_t magic = Get<uint32_t>(p + 0);
  if (magic != kMagic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bad frame magic 0x%08x (want 0x%08x): peer does not speak gdr tcp",
                        magic, kMagic));
  }
  const uint8_t version = Get<uint8_t>(p + 4);
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported frame version ", version, " (want ", kVersion, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Header> Decode(std::span<const std::byte, kHeaderSize> in, uint32_t max_payload) {
  const std::byte* p = in.data();
  if (absl::Status s = CheckMagicAndVersion(p); !s.ok()) return s;
  const uint8_t op = Get<uint8_t>(p + 5);
  if (op < static_cast<uint8_t>(Opcode::kWriteReq) || op > static_cast<uint8_t>(Opcode::kReadData)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown frame opcode ", op));
  }
  const uint16_t status = Get<uint16_t>(p + 6);
  if (status > static_cast<uint16_t>(TargetStatus::kInternal)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown frame status ", status));
  }
  Header h;
  h.opcode = static_cast<Opcode>(op);
  h.status = static_cast<TargetStatus>(status);
  h.rkey = Get<uint32_t>(p + 8);
  h.length = Get<uint32_t>(p + 12);
  h.address = Get<uint64_t>(p + 16);
  h.tag = Get<uint64_t>(p + 24);
  const uint32_t cap = max_payload < kMaxPayload ? max_payload : kMaxPayload;
  if (h.length > cap) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame length ", h.length, " exceeds the limit of ", cap, " bytes"));
  }
  if (IsRequest(h.opcode) && h.status != TargetStatus::kOk) {
    return absl::InvalidArgumentError("request frame carries a nonzero status");
  }
  return h;
}

void EncodeHandshake(Opcode opcode, const HandshakeBody& body,
                     std::span<std::byte, kHandshakeFrameSize> out) {
  Header h;
  h.opcode = opcode;
  h.length = static_cast<uint32_t>(kHandshakeBodySize);
  Encode(h, out.first<kHeaderSize>());
  std::memcpy(out.data() + kHeaderSize, body.data(), body.size());
}

absl::StatusOr<HandshakeBody> DecodeHandshake(std::span<const std::byte, kHandshakeFrameSize> in,
                                              Opcode expected) {
  const std::byte* p = in.data();
  if (absl::Status s = CheckMagicAndVersion(p); !s.ok()) return s;
  const uint8_t op = Get<uint8_t>(p + 5);
  if (op != static_cast<uint8_t>(expected)) {
    return absl::InvalidArgumentError(absl::StrCat("frame opcode ", op, " where ",
                                                   OpcodeName(expected), " was due"));
  }
  if (Get<uint16_t>(p + 6) != 0 || Get<uint32_t>(p + 8) != 0 || Get<uint64_t>(p + 16) != 0 ||
      Get<uint64_t>(p + 24) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        OpcodeName(expected), " frame has a nonzero status, rkey, address or tag"));
  }
  const uint32_t length = Get<uint32_t>(p + 12);
  if (length != kHandshakeBodySize) {
    return absl::InvalidArgumentError(absl::StrCat(OpcodeName(expected), " frame length ",
                                                   length, " (want ", kHandshakeBodySize, ")"));
  }
  HandshakeBody body;
  std::memcpy(body.data(), p + kHeaderSize, body.size());
  return body;
}

absl::string_view OpcodeName(Opcode op) {
  switch (op) {
    case Opcode::kWriteReq: return "WRITE_REQ";
    case Opcode::kReadReq: return "READ_REQ";
    case Opcode::kWriteAck: return "WRITE_ACK";
    case Opcode::kReadData: return "READ_DATA";
    case Opcode::kHello: return "HELLO";
    case Opcode::kChallenge: return "CHALLENGE";
    case Opcode::kProof: return "PROOF";
  }
  return "unknown";
}

uint32_t PayloadBytes(const Header& h) {
  switch (h.opcode) {
    case Opcode::kWriteReq: return h.length;
    case Opcode::kReadReq: return 0;
    case Opcode::kWriteAck: return 0;
    case Opcode::kReadData: return h.status == TargetStatus::kOk ? h.length : 0;
    case Opcode::kHello:
    case Opcode::kChallenge:
    case Opcode::kProof: return static_cast<uint32_t>(kHandshakeBodySize);
  }
  return 0;
}

absl::string_view TargetStatusName(TargetStatus s) {
  switch (s) {
    case TargetStatus::kOk: return "ok";
    case TargetStatus::kBadRkey: return "bad rkey";
    case TargetStatus::kOutOfBounds: return "address range outside the registered region";
    case TargetStatus::kAccessDenied: return "access not permitted on this region";
    case TargetStatus::kInternal: return "target internal error";
  }
  return "unknown";
}

absl::Status TargetStatusToStatus(const Header& r) {
  const std::string what = absl::StrFormat(
      "client target refused %s of %u bytes at 0x%x rkey 0x%x: %s (remote access error)",
      r.opcode == Opcode::kWriteAck ? "write" : "read", r.length, r.address, r.rkey,
      TargetStatusName(r.status));
  switch (r.status) {
    case TargetStatus::kOk: return absl::OkStatus();
    case TargetStatus::kBadRkey:
    case TargetStatus::kOutOfBounds:
    case TargetStatus::kAccessDenied: return absl::PermissionDeniedError(what);
    case TargetStatus::kInternal: return absl::DataLossError(what);
  }
  return absl::DataLossError(what);
}

}  // namespace gdr::tcpwire
