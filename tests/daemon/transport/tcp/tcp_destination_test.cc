// The tcp destination's pool key (daemon/transport/tcp/tcp_destination.h); its checks of a
// request's TcpEndpoint are tested through ValidateOp in ../../service/validate_op_test.cc.
#include "daemon/transport/tcp/tcp_destination.h"

#include "gtest/gtest.h"

namespace gdr {
namespace {

TEST(TcpDestinationTest, KeyBracketsIpv6) {
  EXPECT_EQ((TcpDestination{"127.0.0.1", 5000, {}}).Key(), "127.0.0.1:5000");
  EXPECT_EQ((TcpDestination{"::1", 5000, {}}).Key(), "[::1]:5000");
  EXPECT_EQ((TcpDestination{"localhost", 1, {}}).Key(), "localhost:1");
  EXPECT_NE((TcpDestination{"127.0.0.1", 5000, {}}).Key(),
            (TcpDestination{"127.0.0.1", 5001, {}}).Key());
}

TEST(TcpDestinationTest, IsTheTcpTransportsOwn) {
  TransferOp op;
  EXPECT_EQ(DestinationOf<TcpDestination>(op), nullptr);
  op.destination = std::make_shared<const TcpDestination>("127.0.0.1", 5000, "");
  ASSERT_NE(DestinationOf<TcpDestination>(op), nullptr);
  EXPECT_EQ(DestinationOf<TcpDestination>(op)->port, 5000);
}

}  // namespace
}  // namespace gdr
