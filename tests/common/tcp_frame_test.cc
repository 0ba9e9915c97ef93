// Unit tests of the tcp transport's wire codec (common/wire/tcp_frame.h).
#include "common/wire/tcp_frame.h"

#include <array>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr::tcpwire {
namespace {

using ::testing::HasSubstr;

using Raw = std::array<std::byte, kHeaderSize>;

Raw EncodeRaw(const Header& h) {
  Raw raw;
  raw.fill(std::byte{0xEE});
  Encode(h, raw);
  return raw;
}

Header Sample(Opcode op, TargetStatus st = TargetStatus::kOk) {
  Header h;
  h.opcode = op;
  h.status = st;
  h.rkey = 0xDEADBEEF;
  h.length = 4096;
  h.address = 0x00007F1234567001ull;
  h.tag = 0xFEDCBA9876543210ull;
  return h;
}

template <typename T>
void Poke(Raw& raw, size_t at, T v) {
  std::memcpy(raw.data() + at, &v, sizeof(T));
}

TEST(TcpFrameTest, LayoutIsLittleEndianAtDocumentedOffsets) {
  const Raw raw = EncodeRaw(Sample(Opcode::kReadData, TargetStatus::kOutOfBounds));
  uint32_t magic;
  std::memcpy(&magic, raw.data(), 4);
  EXPECT_EQ(magic, kMagic);
  EXPECT_EQ(static_cast<char>(raw[0]), 'G');
  EXPECT_EQ(static_cast<char>(raw[1]), 'D');
  EXPECT_EQ(static_cast<char>(raw[2]), 'R');
  EXPECT_EQ(static_cast<char>(raw[3]), 'T');
  EXPECT_EQ(static_cast<uint8_t>(raw[4]), kVersion);
  EXPECT_EQ(static_cast<uint8_t>(raw[5]), 4);
  EXPECT_EQ(static_cast<uint8_t>(raw[6]), 2);
  EXPECT_EQ(static_cast<uint8_t>(raw[7]), 0);
  EXPECT_EQ(static_cast<uint8_t>(raw[8]), 0xEF);   // rkey LSB
  EXPECT_EQ(static_cast<uint8_t>(raw[13]), 0x10);  // length 4096 = 0x1000
  EXPECT_EQ(static_cast<uint8_t>(raw[16]), 0x01);  // address LSB
  EXPECT_EQ(static_cast<uint8_t>(raw[31]), 0xFE);  // tag MSB
}

TEST(TcpFrameTest, RoundTripEveryOpcode) {
  for (Opcode op : {Opcode::kWriteReq, Opcode::kReadReq, Opcode::kWriteAck, Opcode::kReadData}) {
    const Header in = Sample(op);
    absl::StatusOr<Header> out = Decode(EncodeRaw(in), kMaxPayload);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->opcode, in.opcode);
    EXPECT_EQ(out->status, in.status);
    EXPECT_EQ(out->rkey, in.rkey);
    EXPECT_EQ(out->length, in.length);
    EXPECT_EQ(out->address, in.address);
    EXPECT_EQ(out->tag, in.tag);
  }
}

TEST(TcpFrameTest, RoundTripEveryResponseStatus) {
  for (Opcode op : {Opcode::kWriteAck, Opcode::kReadData}) {
    for (TargetStatus st : {TargetStatus::kOk, TargetStatus::kBadRkey, TargetStatus::kOutOfBounds,
                            TargetStatus::kAccessDenied, TargetStatus::kInternal}) {
      absl::StatusOr<Header> out = Decode(EncodeRaw(Sample(op, st)), kMaxPayload);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->status, st);
    }
  }
}

TEST(TcpFrameTest, RoundTripExtremeFieldValues) {
  Header in;
  in.opcode = Opcode::kWriteReq;
  in.rkey = UINT32_MAX;
  in.length = kMaxPayload;
  in.address = UINT64_MAX;
  in.tag = UINT64_MAX;
  absl::StatusOr<Header> out = Decode(EncodeRaw(in), kMaxPayload);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->rkey, UINT32_MAX);
  EXPECT_EQ(out->length, kMaxPayload);
  EXPECT_EQ(out->address, UINT64_MAX);
  EXPECT_EQ(out->tag, UINT64_MAX);
}

TEST(TcpFrameTest, RejectsBadMagic) {
  Raw raw = EncodeRaw(Sample(Opcode::kWriteReq));
  Poke<uint32_t>(raw, 0, 0x50545448);  // "HTTP"
  absl::StatusOr<Header> out = Decode(raw, kMaxPayload);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("magic"));
}

TEST(TcpFrameTest, RejectsBadVersion) {
  // 1: the version before links opened with a proof; such a peer must not be taken for a target.
  for (uint8_t v : {uint8_t{0}, uint8_t{1}, uint8_t{3}, uint8_t{255}}) {
    Raw raw = EncodeRaw(Sample(Opcode::kWriteReq));
    Poke<uint8_t>(raw, 4, v);
    absl::StatusOr<Header> out = Decode(raw, kMaxPayload);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << int{v};
    EXPECT_THAT(out.status().message(), HasSubstr("version"));
  }
}

TEST(TcpFrameTest, RejectsUnknownOpcode) {
  for (uint8_t op : {uint8_t{0}, uint8_t{5}, uint8_t{0x81}, uint8_t{255}}) {
    Raw raw = EncodeRaw(Sample(Opcode::kWriteReq));
    Poke<uint8_t>(raw, 5, op);
    absl::StatusOr<Header> out = Decode(raw, kMaxPayload);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << int{op};
    EXPECT_THAT(out.status().message(), HasSubstr("opcode"));
  }
}

TEST(TcpFrameTest, RejectsUnknownStatusValue) {
  for (uint16_t st : {uint16_t{5}, uint16_t{0x100}, uint16_t{0xFFFF}}) {
    Raw raw = EncodeRaw(Sample(Opcode::kWriteAck));
    Poke<uint16_t>(raw, 6, st);
    absl::StatusOr<Header> out = Decode(raw, kMaxPayload);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(out.status().message(), HasSubstr("status"));
  }
}

TEST(TcpFrameTest, LengthLimitIsTheConfiguredMaximum) {
  Header h = Sample(Opcode::kWriteReq);
  h.length = 4096;
  EXPECT_TRUE(Decode(EncodeRaw(h), 4096).ok());
  h.length = 4097;
  absl::StatusOr<Header> out = Decode(EncodeRaw(h), 4096);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("4097"));
  // Responses are held to the same limit: a READ_DATA is followed by `length` bytes.
  h.opcode = Opcode::kReadData;
  EXPECT_EQ(Decode(EncodeRaw(h), 4096).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TcpFrameTest, LengthLimitIsCappedAtKMaxPayload) {
  Header h = Sample(Opcode::kWriteReq);
  h.length = kMaxPayload;
  EXPECT_TRUE(Decode(EncodeRaw(h), UINT32_MAX).ok());
  h.length = kMaxPayload + 1;
  EXPECT_EQ(Decode(EncodeRaw(h), UINT32_MAX).status().code(),
            absl::StatusCode::kInvalidArgument);
  h.length = UINT32_MAX;
  EXPECT_EQ(Decode(EncodeRaw(h), UINT32_MAX).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TcpFrameTest, RejectsRequestWithNonzeroStatus) {
  for (Opcode op : {Opcode::kWriteReq, Opcode::kReadReq}) {
    Raw raw = EncodeRaw(Sample(op));
    Poke<uint16_t>(raw, 6, static_cast<uint16_t>(TargetStatus::kBadRkey));
    absl::StatusOr<Header> out = Decode(raw, kMaxPayload);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr("status"));
  }
}

TEST(TcpFrameTest, PayloadBytes) {
  Header h = Sample(Opcode::kWriteReq);
  h.length = 777;
  EXPECT_EQ(PayloadBytes(h), 777u);
  h.opcode = Opcode::kReadReq;
  EXPECT_EQ(PayloadBytes(h), 0u);
  h.opcode = Opcode::kWriteAck;
  EXPECT_EQ(PayloadBytes(h), 0u);
  h.opcode = Opcode::kReadData;
  EXPECT_EQ(PayloadBytes(h), 777u);
  for (TargetStatus st : {TargetStatus::kBadRkey, TargetStatus::kOutOfBounds,
                          TargetStatus::kAccessDenied, TargetStatus::kInternal}) {
    h.status = st;
    EXPECT_EQ(PayloadBytes(h), 0u) << static_cast<int>(st);
  }
}

TEST(TcpFrameTest, IsRequest) {
  EXPECT_TRUE(IsRequest(Opcode::kWriteReq));
  EXPECT_TRUE(IsRequest(Opcode::kReadReq));
  EXPECT_FALSE(IsRequest(Opcode::kWriteAck));
  EXPECT_FALSE(IsRequest(Opcode::kReadData));
}

TEST(TcpFrameTest, TargetStatusToStatusCodes) {
  Header h = Sample(Opcode::kWriteAck);
  EXPECT_TRUE(TargetStatusToStatus(h).ok());
  h.status = TargetStatus::kBadRkey;
  absl::Status s = TargetStatusToStatus(h);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("write"));
  EXPECT_THAT(s.message(), HasSubstr("0xdeadbeef"));  // names the rkey
  EXPECT_THAT(s.message(), HasSubstr("4096"));        // and the range
  EXPECT_THAT(s.message(), HasSubstr("0x7f1234567001"));
  h.status = TargetStatus::kOutOfBounds;
  EXPECT_EQ(TargetStatusToStatus(h).code(), absl::StatusCode::kPermissionDenied);
  h.status = TargetStatus::kAccessDenied;
  EXPECT_EQ(TargetStatusToStatus(h).code(), absl::StatusCode::kPermissionDenied);
  h.status = TargetStatus::kInternal;
  EXPECT_EQ(TargetStatusToStatus(h).code(), absl::StatusCode::kDataLoss);
  h.opcode = Opcode::kReadData;
  h.status = TargetStatus::kOutOfBounds;
  EXPECT_THAT(TargetStatusToStatus(h).message(), HasSubstr("read"));
}

TEST(TcpFrameTest, TargetStatusNamesAreDistinct) {
  EXPECT_EQ(TargetStatusName(TargetStatus::kOk), "ok");
  EXPECT_NE(TargetStatusName(TargetStatus::kBadRkey), TargetStatusName(TargetStatus::kOutOfBounds));
  EXPECT_NE(TargetStatusName(TargetStatus::kAccessDenied),
            TargetStatusName(TargetStatus::kInternal));
}

}  // namespace
}  // namespace gdr::tcpwire

namespace gdr::tcpwire {
namespace {

using Frame = std::array<std::byte, kHandshakeFrameSize>;

HandshakeBody Body(uint8_t first) {
  HandshakeBody b;
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::byte(first + i);
  return b;
}

TEST(TcpHandshakeFrameTest, RoundTripsEachOpeningFrame) {
  for (Opcode op : {Opcode::kHello, Opcode::kChallenge, Opcode::kProof}) {
    Frame f;
    EncodeHandshake(op, Body(7), f);
    uint32_t magic, length;
    std::memcpy(&magic, f.data(), 4);
    std::memcpy(&length, f.data() + 12, 4);
    EXPECT_EQ(magic, kMagic);
    EXPECT_EQ(static_cast<uint8_t>(f[4]), kVersion);
    EXPECT_EQ(static_cast<uint8_t>(f[5]), static_cast<uint8_t>(op));
    EXPECT_EQ(length, kHandshakeBodySize);
    absl::StatusOr<HandshakeBody> b = DecodeHandshake(f, op);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(*b, Body(7));
  }
}

TEST(TcpHandshakeFrameTest, RefusesAnythingButTheFrameThatIsDue) {
  Frame f;
  EncodeHandshake(Opcode::kHello, Body(1), f);
  // Another opening frame, or a request, where a HELLO is due.
  EXPECT_THAT(DecodeHandshake(f, Opcode::kProof).status().message(), HasSubstr("PROOF"));
  Frame req{};
  Header h;
  h.opcode = Opcode::kWriteReq;
  h.length = kHandshakeBodySize;
  Encode(h, std::span<std::byte, kHeaderSize>(req.data(), kHeaderSize));
  EXPECT_EQ(DecodeHandshake(req, Opcode::kChallenge).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Every header field off its fixed value.
  struct Poke {
    size_t at;
    uint8_t value;
    const char* what;
  } pokes[] = {{0, 'X', "magic"}, {4, 1, "version"},  {6, 1, "nonzero"}, {8, 1, "nonzero"},
               {12, 31, "length"}, {15, 1, "length"}, {16, 1, "nonzero"}, {31, 1, "nonzero"}};
  for (const Poke& p : pokes) {
    Frame bad = f;
    bad[p.at] = std::byte(p.value);
    absl::StatusOr<HandshakeBody> b = DecodeHandshake(bad, Opcode::kHello);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << "byte " << p.at;
    EXPECT_THAT(b.status().message(), HasSubstr(p.what)) << "byte " << p.at;
  }
}

// The op decoder never takes an opening frame: once a link carries ops they are no longer valid.
TEST(TcpHandshakeFrameTest, OpDecoderRefusesOpeningOpcodes) {
  for (Opcode op : {Opcode::kHello, Opcode::kChallenge, Opcode::kProof}) {
    Frame f;
    EncodeHandshake(op, Body(3), f);
    absl::StatusOr<Header> h =
        Decode(std::span<const std::byte, kHeaderSize>(f.data(), kHeaderSize), kMaxPayload);
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << OpcodeName(op);
  }
}

}  // namespace
}  // namespace gdr::tcpwire
