// Unit tests of the gRPC peer parser (common/grpc/grpc_peer.h): every form gRPC writes, the
// IPv4-mapped normal form, and text that must be refused rather than guessed at.
#include "common/grpc/grpc_peer.h"

#include "gtest/gtest.h"

namespace gdr {
namespace {

IpAddress Ip(const char* text) { return *IpAddress::Parse(text); }

TEST(GrpcPeerTest, ParsesIpv4Ipv6AndUnix) {
  absl::StatusOr<GrpcPeer> p = ParseGrpcPeer("ipv4:10.0.0.7:41234");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->kind, GrpcPeer::Kind::kIp);
  EXPECT_EQ(p->ip, Ip("10.0.0.7"));

  p = ParseGrpcPeer("ipv6:[fd00::7]:50051");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ip, Ip("fd00::7"));
  p = ParseGrpcPeer("ipv6:%5B::1%5D:50051");  // brackets percent-encoded
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ip, Ip("::1"));
  p = ParseGrpcPeer("ipv6:%5b::1%5d:1");
  ASSERT_TRUE(p.ok()) << p.status();

  // A dual-stack listener reports IPv4 callers IPv4-mapped: the same address as plain IPv4.
  p = ParseGrpcPeer("ipv6:[::ffff:127.0.0.1]:6000");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ip, Ip("127.0.0.1"));
  EXPECT_TRUE(p->ip.is_v4());

  p = ParseGrpcPeer("ipv6:[fe80::1%25eth0]:7");  // zone dropped
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ip, Ip("fe80::1"));

  for (const char* unix_peer : {"unix:/run/gdrstored.sock", "unix:", "unix-abstract:gdr"}) {
    p = ParseGrpcPeer(unix_peer);
    ASSERT_TRUE(p.ok()) << unix_peer;
    EXPECT_EQ(p->kind, GrpcPeer::Kind::kUnix) << unix_peer;
  }
}

TEST(GrpcPeerTest, RefusesGarbage) {
  for (const char* bad :
       {"", "inproc", "ipv4:", "ipv4:10.0.0.7", "ipv4:10.0.0.7:", "ipv4:10.0.0.7:99999",
        "ipv4:10.0.0.7:12x", "ipv4:host.example:80", "ipv4:::1:80", "ipv6:::1:80",
        "ipv6:[::1]", "ipv6:[::1]80", "ipv6:[10.0.0.1:80", "ipv6:%5B::1]:80", "IPV4:1.2.3.4:5",
        "tcp:1.2.3.4:5", "ipv4:1.2.3.4:-5", "ipv6:[]:80", "ipv4:1.2.3.4:+5"}) {
    absl::StatusOr<GrpcPeer> p = ParseGrpcPeer(bad);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  absl::StatusOr<GrpcPeer> p = ParseGrpcPeer(std::string("ipv4:\x01\x02", 7));
  EXPECT_NE(p.status().message().find("ipv4:??"), absl::string_view::npos) << p.status();
}

TEST(GrpcPeerTest, SamePeerAddressComparesAddressesNotPorts) {
  EXPECT_TRUE(SamePeerAddress("ipv4:10.0.0.7:41234", "ipv4:10.0.0.7:5000"));
  EXPECT_TRUE(SamePeerAddress("ipv6:[::ffff:10.0.0.7]:1", "ipv4:10.0.0.7:2"));
  EXPECT_TRUE(SamePeerAddress("ipv6:%5Bfd00::7%5D:1", "ipv6:[fd00::7]:2"));
  EXPECT_TRUE(SamePeerAddress("unix:/run/gdrstored.sock", "unix:"));
  EXPECT_FALSE(SamePeerAddress("ipv4:10.0.0.7:1", "ipv4:10.0.0.8:1"));
  EXPECT_FALSE(SamePeerAddress("ipv4:127.0.0.1:1", "unix:/run/gdrstored.sock"));
  EXPECT_FALSE(SamePeerAddress("ipv4:10.0.0.7:1", "garbage"));
  EXPECT_FALSE(SamePeerAddress("garbage", "other garbage"));
  EXPECT_TRUE(SamePeerAddress("inproc", "inproc"));
}

// What a fault rule's client= is compared with (it was the fault injector's PeerHost).
TEST(GrpcPeerTest, GrpcPeerHostDropsThePort) {
  EXPECT_EQ(GrpcPeerHost("ipv4:127.0.0.1:4242"), "127.0.0.1");
  EXPECT_EQ(GrpcPeerHost("ipv6:[::1]:4242"), "[::1]");
  EXPECT_EQ(GrpcPeerHost("unix:/run/x.sock"), "unix:/run/x.sock");
  EXPECT_EQ(GrpcPeerHost("ipv6:%5B::1%5D:4242"), "[::1]");
  EXPECT_EQ(GrpcPeerHost("ipv6:[::ffff:10.0.0.7]:1"), "10.0.0.7");
  EXPECT_EQ(GrpcPeerHost("inproc"), "inproc");
}

TEST(GrpcPeerTest, ParseGrpcTargetTakesTheChannelForms) {
  for (const char* t : {"10.0.0.7:50051", "dns:///10.0.0.7:50051", "ipv4:10.0.0.7:50051"}) {
    absl::StatusOr<GrpcTarget> p = ParseGrpcTarget(t);
    ASSERT_TRUE(p.ok()) << t << ": " << p.status();
    EXPECT_EQ(p->unix_path, "") << t;
    EXPECT_EQ(p->host_port.host, "10.0.0.7") << t;
    EXPECT_EQ(p->host_port.port, 50051) << t;
  }
  absl::StatusOr<GrpcTarget> p = ParseGrpcTarget("ipv6:[fd00::7]:1");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->host_port.host, "fd00::7");
  for (const char* t : {"unix:/run/gdrstored.sock", "unix:///run/gdrstored.sock"}) {
    p = ParseGrpcTarget(t);
    ASSERT_TRUE(p.ok()) << t << ": " << p.status();
    EXPECT_EQ(p->unix_path, "/run/gdrstored.sock") << t;
  }
  EXPECT_FALSE(ParseGrpcTarget("unix:").ok());
  EXPECT_FALSE(ParseGrpcTarget("10.0.0.7").ok());
}

}  // namespace
}  // namespace gdr
