// The local transport's endpoint (daemon/transport/local/local_destination.h): its parser, and
// the same checks as ValidateOp runs them for a daemon offering (or not offering) local.
#include "daemon/transport/local/local_destination.h"

#include <memory>
#include <string>

#include "daemon/service/validate_op.h"
#include "daemon/store/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/transport/parsing_transports.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace pb = gdrstore::v1;

pb::RemoteBuffer LocalBuffer(uint64_t session, const std::string& key) {
  pb::RemoteBuffer b;
  b.set_address(0x7f0000001003ull);
  b.set_length(8192);
  b.set_rkey(7);
  b.mutable_local()->set_session(session);
  b.mutable_local()->set_key(key);
  return b;
}

const std::string kKey = "\x01\x02\x03\x04\x05\x06\x07\x08SECRETKY";  // 16 bytes

TEST(LocalDestinationTest, CarriesSessionAndKey) {
  ASSERT_EQ(kKey.size(), 16u);
  absl::StatusOr<std::shared_ptr<const LocalDestination>> d =
      ParseLocalDestination(LocalBuffer(0x1122334455667788ull, kKey));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->session, 0x1122334455667788ull);
  EXPECT_EQ((*d)->key, kKey);
  EXPECT_EQ((*d)->transport(), TransportKind::kLocal);
  TransferOp op;
  op.destination = *d;
  ASSERT_NE(DestinationOf<LocalDestination>(op), nullptr);
}

TEST(LocalDestinationTest, ZeroSessionIsRefusedNamingTheField) {
  absl::StatusOr<std::shared_ptr<const LocalDestination>> d =
      ParseLocalDestination(LocalBuffer(0, kKey));
  ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("buffer.local.session is 0"));
}

TEST(LocalDestinationTest, KeyMustBeSixteenBytesAndIsNeverQuoted) {
  for (const std::string& key :
       {std::string(), std::string("SECRETSECRET15b"), kKey + "X", std::string(64, 'Q')}) {
    absl::StatusOr<std::shared_ptr<const LocalDestination>> d =
        ParseLocalDestination(LocalBuffer(5, key));
    ASSERT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << key.size();
    const std::string m(d.status().message());
    EXPECT_THAT(m, HasSubstr("buffer.local.key must be 16 bytes, not " +
                             std::to_string(key.size())));
    if (!key.empty()) {
      EXPECT_THAT(m, Not(HasSubstr(key.substr(0, 6))));
    }
  }
}

class LocalValidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> s = Store::Create({{"vol0", 1 << 20, {}, {}}});
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    extent_.set_volume("vol0");
    extent_.set_offset(4096);
    extent_.set_length(8192);
  }
  absl::StatusOr<TransferOp> Validate(const pb::RemoteBuffer& b, OfferedTransports offered) {
    return ValidateOp(Direction::kStoreToClient, &extent_, &b, *store_, 1 << 20,
                      *testing::ParsingTransports(offered));
  }
  std::unique_ptr<Store> store_;
  pb::Extent extent_;
};

TEST_F(LocalValidateTest, OfferedLocalEndpointIsReadByItsParser) {
  absl::StatusOr<TransferOp> op =
      Validate(LocalBuffer(9, kKey), {TransportKind::kTcp, TransportKind::kLocal});
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->transport, TransportKind::kLocal);
  const LocalDestination* d = DestinationOf<LocalDestination>(*op);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->session, 9u);
  EXPECT_EQ(Validate(LocalBuffer(9, "short"), {TransportKind::kLocal}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(LocalValidateTest, NotOfferedIsUnimplementedNamingLocal) {
  absl::StatusOr<TransferOp> op = Validate(LocalBuffer(9, kKey), {TransportKind::kTcp});
  ASSERT_EQ(op.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(op.status().message()), HasSubstr("local"));
}

}  // namespace
}  // namespace gdr
