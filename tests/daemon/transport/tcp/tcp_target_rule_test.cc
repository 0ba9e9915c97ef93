// Unit tests of the tcp target rule (daemon/transport/tcp/tcp_target_rule.h): which targets a
// caller may name, by caller kind and --tcp-target-allow, and what a refusal says.
#include "daemon/transport/tcp/tcp_target_rule.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

TEST(TcpTargetRuleTest, ByDefaultOnlyTheCallersOwnAddress) {
  const TcpTargetRule rule({});
  EXPECT_TRUE(rule.Check("ipv4:10.0.0.7:40000", "10.0.0.7:5", Ip("10.0.0.7")).ok());
  EXPECT_TRUE(rule.Check("ipv6:[::ffff:10.0.0.7]:40000", "t", Ip("10.0.0.7")).ok());
  EXPECT_TRUE(rule.Check("ipv4:10.0.0.7:40000", "t", Ip("::ffff:10.0.0.7")).ok());
  EXPECT_TRUE(rule.Check("ipv6:[fd00::7]:1", "t", Ip("fd00::7")).ok());
  // The host's loopback under either family ("localhost" reaches both).
  EXPECT_TRUE(rule.Check("ipv6:[::1]:1", "t", Ip("127.0.0.1")).ok());
  EXPECT_TRUE(rule.Check("ipv4:127.0.0.1:1", "t", Ip("::1")).ok());

  absl::Status s = rule.Check("ipv4:10.0.0.7:40000", "10.0.0.8:4000", Ip("10.0.0.8"));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("tcp target 10.0.0.8:4000 (10.0.0.8)"));
  EXPECT_THAT(s.message(), HasSubstr("caller ipv4:10.0.0.7:40000"));
  EXPECT_THAT(s.message(), HasSubstr("--tcp-target-allow 10.0.0.8/32"));
  EXPECT_EQ(rule.Check("ipv4:127.0.0.1:1", "t", Ip("127.0.0.2")).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(rule.Check("ipv6:[fd00::7]:1", "t", Ip("fd00::8")).message(),
              HasSubstr("--tcp-target-allow fd00::8/128"));
}

TEST(TcpTargetRuleTest, UnixCallersMayNameLoopbackOnly) {
  const TcpTargetRule rule({});
  EXPECT_TRUE(rule.Check("unix:/run/gdrstored.sock", "t", Ip("127.0.0.1")).ok());
  EXPECT_TRUE(rule.Check("unix:/run/gdrstored.sock", "t", Ip("127.0.0.2")).ok());
  EXPECT_TRUE(rule.Check("unix:/run/gdrstored.sock", "t", Ip("::1")).ok());
  absl::Status s = rule.Check("unix:/run/gdrstored.sock", "t", Ip("10.0.0.1"));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("unix socket"));
}

TEST(TcpTargetRuleTest, AnUnrecognisedCallerGetsOnlyWhatTheAllowListGives) {
  const TcpTargetRule none({});
  EXPECT_EQ(none.Check("inproc", "t", Ip("127.0.0.1")).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(none.Check("", "t", Ip("127.0.0.1")).code(), absl::StatusCode::kPermissionDenied);
  const TcpTargetRule allow({*Cidr::Parse("127.0.0.0/8")});
  EXPECT_TRUE(allow.Check("inproc", "t", Ip("127.0.0.1")).ok());
}

TEST(TcpTargetRuleTest, AllowListWidensExplicitly) {
  const TcpTargetRule rule({*Cidr::Parse("10.0.0.0/8"), *Cidr::Parse("fd00::/8")});
  EXPECT_TRUE(rule.Check("ipv4:192.168.0.1:1", "t", Ip("10.200.0.1")).ok());
  EXPECT_TRUE(rule.Check("ipv4:192.168.0.1:1", "t", Ip("fd12::1")).ok());
  EXPECT_FALSE(rule.Check("ipv4:192.168.0.1:1", "t", Ip("11.0.0.1")).ok());
  EXPECT_THAT(rule.Describe(), HasSubstr("10.0.0.0/8, fd00::/8"));
}

TEST(TcpTargetRuleTest, EveryResolvedAddressMustPass) {
  const TcpTargetRule rule({});
  absl::StatusOr<std::vector<SocketAddress>> both = ResolveTcp("127.0.0.1", 80);
  ASSERT_TRUE(both.ok());
  absl::StatusOr<std::vector<SocketAddress>> other = ResolveTcp("127.0.0.2", 80);
  ASSERT_TRUE(other.ok());
  both->insert(both->end(), other->begin(), other->end());
  EXPECT_TRUE(rule.CheckAll("ipv4:127.0.0.1:1", "t", {both->front()}).ok());
  absl::Status s = rule.CheckAll("ipv4:127.0.0.1:1", "name:80", *both);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("127.0.0.2"));
}

TEST(TcpTargetRuleTest, CallerClassIsTheAddressOrUnix) {
  EXPECT_EQ(TcpTargetRule::CallerClass("ipv4:10.0.0.7:1"), "10.0.0.7");
  EXPECT_EQ(TcpTargetRule::CallerClass("ipv4:10.0.0.7:2"), "10.0.0.7");
  EXPECT_EQ(TcpTargetRule::CallerClass("ipv6:[::ffff:10.0.0.7]:2"), "10.0.0.7");
  EXPECT_EQ(TcpTargetRule::CallerClass("unix:/x"), "unix");
  EXPECT_EQ(TcpTargetRule::CallerClass("inproc"), "?");
}

}  // namespace
}  // namespace gdr
