// The transport name table and its conversions: every kind has its name and round-trips through
// the wire enum and the endpoint oneof; what the table does not know is refused, not guessed.
#include "common/wire/transport_kind.h"

#include <gtest/gtest.h>

namespace gdr {
namespace {

namespace v1 = gdrstore::v1;

TEST(TransportKindTest, EachKindHasItsName) {
  EXPECT_STREQ(TransportName(TransportKind::kTcp), "tcp");
  EXPECT_STREQ(TransportName(TransportKind::kRc), "rc");
  EXPECT_STREQ(TransportName(TransportKind::kDc), "dc");
}

TEST(TransportKindTest, WireEnumRoundTripsAndUnknownValuesAreNamedUnknown) {
  EXPECT_EQ(ToProto(TransportKind::kTcp), v1::TRANSPORT_TCP);
  EXPECT_EQ(ToProto(TransportKind::kRc), v1::TRANSPORT_RC);
  EXPECT_EQ(ToProto(TransportKind::kDc), v1::TRANSPORT_DC);
  for (TransportKind k : kTransportKinds) {
    EXPECT_EQ(FromProto(ToProto(k)), k);
    EXPECT_STREQ(TransportName(ToProto(k)), TransportName(k));
  }
  EXPECT_EQ(FromProto(v1::TRANSPORT_UNSPECIFIED), std::nullopt);
  EXPECT_EQ(FromProto(static_cast<v1::Transport>(42)), std::nullopt);
  EXPECT_STREQ(TransportName(static_cast<v1::Transport>(42)), "unknown");
}

TEST(TransportKindTest, EndpointCaseNamesItsTransport) {
  v1::RemoteBuffer b;
  EXPECT_EQ(TransportOfEndpoint(b.endpoint_case()), std::nullopt);
  b.mutable_tcp();
  EXPECT_EQ(TransportOfEndpoint(b.endpoint_case()), TransportKind::kTcp);
  b.mutable_rc();
  EXPECT_EQ(TransportOfEndpoint(b.endpoint_case()), TransportKind::kRc);
  b.mutable_dc();
  EXPECT_EQ(TransportOfEndpoint(b.endpoint_case()), TransportKind::kDc);
}

}  // namespace
}  // namespace gdr
