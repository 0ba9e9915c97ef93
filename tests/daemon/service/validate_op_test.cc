// Unit tests of request validation (daemon/service/validate_op.h) against the status table
// of proto/gdrstore/v1/gdrstore.proto: every malformed field gets its documented code, the
// endpoint's fields included (each read by its transport's own parser).
#include "daemon/service/validate_op.h"

#include <memory>
#include <string>

#include "common/wire/tcp_frame.h"
#include "daemon/store/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/transport/parsing_transports.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;
using ::gdr::testing::ParsingTransports;
namespace pb = gdrstore::v1;

const TcpDestination& Tcp(const TransferOp& op) {
  const TcpDestination* d = DestinationOf<TcpDestination>(op);
  EXPECT_NE(d, nullptr);
  static const TcpDestination kNone;
  return d != nullptr ? *d : kNone;
}

constexpr uint64_t kVolSize = 1 << 20;
constexpr uint64_t kMaxOp = 256 << 10;

class ValidateOpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> s =
        Store::Create({{"vol0", kVolSize, {}, {}}, {"small", 4096, {}, {}}});
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    extent_.set_volume("vol0");
    extent_.set_offset(4096);
    extent_.set_length(8192);
    buffer_.set_address(0x7f0000001003ull);
    buffer_.set_length(8192);
    buffer_.set_rkey(0x1234);
    buffer_.mutable_tcp()->set_host("127.0.0.1");
    buffer_.mutable_tcp()->set_port(40000);
    buffer_.mutable_tcp()->set_secret(std::string(32, '\x5c'));
  }

  absl::StatusOr<TransferOp> Validate(Direction d = Direction::kStoreToClient) {
    return ValidateOp(d, &extent_, &buffer_, *store_, kMaxOp, *ParsingTransports(offered_));
  }
  absl::StatusCode Code() { return Validate().status().code(); }

  std::unique_ptr<Store> store_;
  pb::Extent extent_;
  pb::RemoteBuffer buffer_;
  OfferedTransports offered_ = {TransportKind::kTcp};
};

TEST_F(ValidateOpTest, GoodOpCarriesEveryField) {
  for (Direction d : {Direction::kStoreToClient, Direction::kClientToStore}) {
    absl::StatusOr<TransferOp> op = Validate(d);
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ(op->direction, d);
    EXPECT_EQ(op->volume, "vol0");
    EXPECT_EQ(op->offset, 4096u);
    EXPECT_EQ(op->local, store_->Find("vol0")->data() + 4096);
    EXPECT_EQ(op->length, 8192u);
    EXPECT_EQ(op->remote_address, 0x7f0000001003ull);
    EXPECT_EQ(op->rkey, 0x1234u);
    EXPECT_EQ(Tcp(*op).host, "127.0.0.1");
    EXPECT_EQ(Tcp(*op).port, 40000);
  }
}

TEST_F(ValidateOpTest, MissingExtentOrBuffer) {
  const std::unique_ptr<TransportSet> transports = ParsingTransports(offered_);
  absl::StatusOr<TransferOp> op =
      ValidateOp(Direction::kStoreToClient, nullptr, &buffer_, *store_, kMaxOp, *transports);
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(op.status().message(), HasSubstr("extent"));
  op = ValidateOp(Direction::kStoreToClient, &extent_, nullptr, *store_, kMaxOp, *transports);
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(op.status().message(), HasSubstr("buffer"));
}

TEST_F(ValidateOpTest, ZeroLength) {
  extent_.set_length(0);
  buffer_.set_length(0);
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ValidateOpTest, LengthAboveMaxOpBytes) {
  extent_.set_offset(0);
  extent_.set_length(kMaxOp);
  buffer_.set_length(kMaxOp);
  EXPECT_TRUE(Validate().ok());
  extent_.set_length(kMaxOp + 1);
  buffer_.set_length(kMaxOp + 1);
  absl::StatusOr<TransferOp> op = Validate();
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(op.status().message(), HasSubstr("256 KiB"));
}

TEST_F(ValidateOpTest, UnknownVolumeIsNotFound) {
  extent_.set_volume("vol9");
  absl::StatusOr<TransferOp> op = Validate();
  EXPECT_EQ(op.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(op.status().message(), HasSubstr("vol9"));
  EXPECT_THAT(op.status().message(), HasSubstr("small"));  // lists what exists
  EXPECT_THAT(op.status().message(), HasSubstr("vol0"));
}

TEST_F(ValidateOpTest, UnknownVolumeNameIsSanitisedInTheMessage) {
  extent_.set_volume(std::string("ev\n\x01il") + std::string(200, 'x'));
  absl::StatusOr<TransferOp> op = Validate();
  EXPECT_EQ(op.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(op.status().message(), ::testing::Not(HasSubstr("\n")));
  EXPECT_THAT(op.status().message(), ::testing::Not(HasSubstr(std::string(100, 'x'))));
  EXPECT_EQ(Validate().status().code(), absl::StatusCode::kNotFound);
  extent_.set_volume("");
  EXPECT_EQ(Code(), absl::StatusCode::kNotFound);
}

TEST_F(ValidateOpTest, PastTheEndIsOutOfRange) {
  // Exactly to the end is fine.
  extent_.set_offset(kVolSize - 8192);
  EXPECT_TRUE(Validate().ok());
  extent_.set_offset(kVolSize - 8191);
  EXPECT_EQ(Code(), absl::StatusCode::kOutOfRange);
  extent_.set_offset(kVolSize);
  EXPECT_EQ(Code(), absl::StatusCode::kOutOfRange);
  extent_.set_offset(kVolSize + 1);
  EXPECT_EQ(Code(), absl::StatusCode::kOutOfRange);
  // A small volume: the op fits the limit but not the volume.
  extent_.set_volume("small");
  extent_.set_offset(0);
  EXPECT_EQ(Code(), absl::StatusCode::kOutOfRange);
  extent_.set_length(4096);
  buffer_.set_length(4096);
  EXPECT_TRUE(Validate().ok());
}

TEST_F(ValidateOpTest, OffsetPlusLengthOverflowIsOutOfRange) {
  // offset + length wraps to a small number that would pass a naive `offset + length <= size`.
  for (uint64_t offset : {UINT64_MAX, UINT64_MAX - 8191, UINT64_MAX - 8192 + 100,
                          UINT64_MAX - kVolSize}) {
    extent_.set_offset(offset);
    absl::StatusOr<TransferOp> op = Validate();
    EXPECT_EQ(op.status().code(), absl::StatusCode::kOutOfRange) << offset;
  }
}

TEST_F(ValidateOpTest, BufferLengthMismatch) {
  buffer_.set_length(8191);
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument);
  buffer_.set_length(8193);
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument);
  buffer_.set_length(0);
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ValidateOpTest, ZeroRkey) {
  buffer_.set_rkey(0);
  absl::StatusOr<TransferOp> op = Validate();
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(op.status().message(), HasSubstr("rkey"));
}

TEST_F(ValidateOpTest, AddressRangeWrappingTheAddressSpace) {
  buffer_.set_address(UINT64_MAX - 8192);  // last byte at UINT64_MAX - 1: fine
  EXPECT_TRUE(Validate().ok());
  buffer_.set_address(UINT64_MAX - 100);
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument);
  buffer_.set_address(UINT64_MAX);
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ValidateOpTest, NoEndpoint) {
  buffer_.clear_endpoint();
  absl::StatusOr<TransferOp> op = Validate();
  EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(op.status().message(), HasSubstr("endpoint"));
}

TEST_F(ValidateOpTest, RcNeedsTheTransportOfferedAndAConnectionId) {
  buffer_.mutable_rc()->set_connection_id(7);
  EXPECT_EQ(Code(), absl::StatusCode::kUnimplemented);
  offered_.Add(TransportKind::kRc);
  auto op = Validate();
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->transport, TransportKind::kRc);
  const RcDestination* rc = DestinationOf<RcDestination>(*op);
  ASSERT_NE(rc, nullptr);
  EXPECT_EQ(rc->connection_id, 7u);
  buffer_.mutable_rc()->set_connection_id(0);
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ValidateOpTest, DcNotOfferedIsUnimplemented) {
  buffer_.mutable_dc()->set_dct_number(0x123);
  buffer_.mutable_dc()->set_dc_key(42);
  buffer_.mutable_dc()->set_lid(3);
  EXPECT_EQ(Code(), absl::StatusCode::kUnimplemented);
}

TEST_F(ValidateOpTest, OfferedDcEndpointIsValidated) {
  offered_.Add(TransportKind::kDc);
  buffer_.mutable_dc()->set_dct_number(0x123);
  buffer_.mutable_dc()->set_dc_key(42);
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument) << "neither GID nor LID";
  buffer_.mutable_dc()->set_lid(3);
  absl::StatusOr<TransferOp> dc = Validate();
  ASSERT_TRUE(dc.ok()) << dc.status();
  EXPECT_EQ(dc->transport, TransportKind::kDc);
  const dc::DcDestination* dest = DestinationOf<dc::DcDestination>(*dc);
  ASSERT_NE(dest, nullptr);
  EXPECT_EQ(dest->key.dct_number, 0x123u);
  EXPECT_EQ(dest->key.addr.lid, 3);
  EXPECT_EQ(dest->access_key.value(), 42u);
  buffer_.mutable_dc()->set_dct_number(0);
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ValidateOpTest, TcpDisabledIsUnimplemented) {
  offered_ = {};
  EXPECT_EQ(Code(), absl::StatusCode::kUnimplemented);
}

TEST_F(ValidateOpTest, BadTcpHost) {
  buffer_.mutable_tcp()->set_host("");
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument);
  buffer_.mutable_tcp()->set_host(std::string(256, 'h'));
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument);
  buffer_.mutable_tcp()->set_host(std::string("127.0.0.1\0evil", 14));
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument);
  buffer_.mutable_tcp()->set_host(std::string(255, 'h'));
  EXPECT_TRUE(Validate().ok());
}

TEST_F(ValidateOpTest, BadTcpPort) {
  for (uint32_t port : {0u, 65536u, 70000u, UINT32_MAX}) {
    buffer_.mutable_tcp()->set_port(port);
    absl::StatusOr<TransferOp> op = Validate();
    EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument) << port;
  }
  for (uint32_t port : {1u, 65535u}) {
    buffer_.mutable_tcp()->set_port(port);
    absl::StatusOr<TransferOp> op = Validate();
    ASSERT_TRUE(op.ok()) << port << ": " << op.status();
    EXPECT_EQ(Tcp(*op).port, port);
  }
}

// The piece size a client asks for is 0 (the daemon's own) or within the wire's bounds, and
// reaches the transport; anything else is refused naming the field.
TEST_F(ValidateOpTest, TcpChunkBytesIsZeroOrWithinTheAskedBounds) {
  for (uint32_t n : {0u, tcpwire::kMinAskedChunk, 4u << 20, tcpwire::kMaxAskedChunk}) {
    buffer_.mutable_tcp()->set_chunk_bytes(n);
    absl::StatusOr<TransferOp> op = Validate();
    ASSERT_TRUE(op.ok()) << n << ": " << op.status();
    EXPECT_EQ(Tcp(*op).chunk_bytes, n);
  }
  for (uint32_t n : {1u, 4096u, tcpwire::kMinAskedChunk - 1, tcpwire::kMaxAskedChunk + 1,
                     UINT32_MAX}) {
    buffer_.mutable_tcp()->set_chunk_bytes(n);
    absl::StatusOr<TransferOp> op = Validate();
    EXPECT_EQ(op.status().code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_NE(op.status().message().find("buffer.tcp.chunk_bytes"), absl::string_view::npos)
        << op.status();
  }
}

// The secret is required, 16..64 bytes, carried to the transport, and never quoted back.
TEST_F(ValidateOpTest, TcpSecretIsRequiredAndBounded) {
  const std::string secret = "0123456789abcdefSECRETSECRET";
  buffer_.mutable_tcp()->set_secret(secret);
  absl::StatusOr<TransferOp> op = Validate();
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(Tcp(*op).secret, secret);
  EXPECT_EQ(Tcp(*op).Key().find("SECRET"), std::string::npos);
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{65}, size_t{1000}}) {
    buffer_.mutable_tcp()->set_secret(std::string(n, 'S'));
    absl::StatusOr<TransferOp> bad = Validate();
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_NE(bad.status().message().find("buffer.tcp.secret"), absl::string_view::npos);
    EXPECT_EQ(bad.status().message().find("SS"), absl::string_view::npos);
  }
  buffer_.mutable_tcp()->clear_secret();
  EXPECT_EQ(Code(), absl::StatusCode::kInvalidArgument);
  for (size_t n : {size_t{16}, size_t{64}}) {
    buffer_.mutable_tcp()->set_secret(std::string(n, 'S'));
    EXPECT_TRUE(Validate().ok()) << n;
  }
}

}  // namespace
}  // namespace gdr
