// GID parsing and the RoCE v2 GID choice, against a sysfs tree laid out like the kernel's
// (/sys/class/infiniband/DEV/ports/N/...) in a temporary directory: the stand-in for a NIC.
#include "common/verbs/gid_table.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace gdr::verbs {
namespace {

namespace fs = std::filesystem;

class FakeSysfs {
 public:
  FakeSysfs() {
    char tmpl[] = "/tmp/gdr-sysfs-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  ~FakeSysfs() { fs::remove_all(root_); }
  void Port(const std::string& dev, int port) {
    const fs::path p = PortDir(dev, port);
    fs::create_directories(p / "gids");
    fs::create_directories(p / "gid_attrs/types");
    fs::create_directories(p / "gid_attrs/ndevs");
    Write(p / "state", "4: ACTIVE");
  }
  void Entry(const std::string& dev, int port, int index, const std::string& gid,
             const std::string& type, const std::string& ndev) {
    const fs::path p = PortDir(dev, port);
    Write(p / "gids" / std::to_string(index), gid);
    if (!type.empty()) Write(p / "gid_attrs/types" / std::to_string(index), type);
    if (!ndev.empty()) Write(p / "gid_attrs/ndevs" / std::to_string(index), ndev);
  }
  const std::string& root() const { return root_; }

 private:
  fs::path PortDir(const std::string& dev, int port) const {
    return fs::path(root_) / "class/infiniband" / dev / "ports" / std::to_string(port);
  }
  static void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text << "\n"; }
  std::string root_;
};

constexpr char kZero[] = "0000:0000:0000:0000:0000:0000:0000:0000";
constexpr char kLinkLocal[] = "fe80:0000:0000:0000:b0c1:2cff:fe3d:4e5f";
constexpr char kV4[] = "0000:0000:0000:0000:0000:ffff:0a0b:0001";
constexpr char kV4b[] = "0000:0000:0000:0000:0000:ffff:c0a8:0107";

TEST(GidTest, ParseAndFormatRoundTrip) {
  auto g = ParseGid(kV4);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(FormatGid(*g), kV4);
  EXPECT_EQ(GidIpv4(*g), "10.11.0.1");
  EXPECT_EQ(DescribeGid(*g), "10.11.0.1");
  auto ll = ParseGid(kLinkLocal);
  ASSERT_TRUE(ll.ok());
  EXPECT_FALSE(GidIpv4(*ll).has_value());
}

TEST(GidTest, ParseRejectsMalformedText) {
  EXPECT_FALSE(ParseGid("").ok());
  EXPECT_FALSE(ParseGid("0000:0000").ok());
  EXPECT_FALSE(ParseGid("0000:0000:0000:0000:0000:ffff:0a0b:00zz").ok());
  EXPECT_FALSE(ParseGid("0000:0000:0000:0000:0000:ffff:0a0b:00001").ok());
}

TEST(GidTest, GidForIpMapsIpv4AndKeepsIpv6) {
  auto v4 = GidForIp("10.11.0.1");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(FormatGid(*v4), kV4);
  auto v6 = GidForIp("fe80::b0c1:2cff:fe3d:4e5f");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(FormatGid(*v6), kLinkLocal);
  EXPECT_EQ(GidForIp("rxe0").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GidTableTest, ReadsNonZeroEntriesWithTypeAndNetdev) {
  FakeSysfs sys;
  sys.Port("rxe0", 1);
  sys.Entry("rxe0", 1, 0, kLinkLocal, "IB/RoCE v1", "veth0");
  sys.Entry("rxe0", 1, 1, kLinkLocal, "RoCE v2", "veth0");
  sys.Entry("rxe0", 1, 2, kV4, "IB/RoCE v1", "veth0");
  sys.Entry("rxe0", 1, 3, kV4, "RoCE v2", "veth0");
  sys.Entry("rxe0", 1, 4, kZero, "", "");
  auto t = ReadGidTable(sys.root(), "rxe0", 1, 16);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 4u);
  EXPECT_EQ((*t)[3].index, 3);
  EXPECT_EQ((*t)[3].type, "RoCE v2");
  EXPECT_EQ((*t)[3].netdev, "veth0");
}

TEST(GidTableTest, MissingPortIsNotFound) {
  FakeSysfs sys;
  EXPECT_EQ(ReadGidTable(sys.root(), "mlx5_0", 1, 16).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(GidTableTest, AutoPicksRoceV2Ipv4MappedOverV1AndLinkLocal) {
  FakeSysfs sys;
  sys.Port("rxe0", 1);
  sys.Entry("rxe0", 1, 0, kLinkLocal, "IB/RoCE v1", "veth0");
  sys.Entry("rxe0", 1, 1, kLinkLocal, "RoCE v2", "veth0");
  sys.Entry("rxe0", 1, 2, kV4, "IB/RoCE v1", "veth0");
  sys.Entry("rxe0", 1, 3, kV4, "RoCE v2", "veth0");
  auto t = ReadGidTable(sys.root(), "rxe0", 1, 16);
  ASSERT_TRUE(t.ok());
  auto idx = PickRoceV2Gid(*t, std::nullopt);
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_EQ(*idx, 3);
}

TEST(GidTableTest, ByAddressPicksTheMatchingEntryOnly) {
  FakeSysfs sys;
  sys.Port("mlx5_0", 1);
  sys.Entry("mlx5_0", 1, 3, kV4, "RoCE v2", "eth0");
  sys.Entry("mlx5_0", 1, 5, kV4b, "IB/RoCE v1", "eth0");
  sys.Entry("mlx5_0", 1, 7, kV4b, "RoCE v2", "eth0");
  auto t = ReadGidTable(sys.root(), "mlx5_0", 1, 16);
  ASSERT_TRUE(t.ok());
  auto idx = PickRoceV2Gid(*t, *GidForIp("192.168.1.7"));
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_EQ(*idx, 7);
  auto none = PickRoceV2Gid(*t, *GidForIp("192.168.1.8"));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("192.168.1.8"), std::string::npos);
}

TEST(GidTest, LinkLocalIsFe80Slash10) {
  EXPECT_TRUE(IsLinkLocal(*ParseGid(kLinkLocal)));
  EXPECT_TRUE(IsLinkLocal(*GidForIp("febf::1")));
  EXPECT_FALSE(IsLinkLocal(*GidForIp("fec0::1")));
  EXPECT_FALSE(IsLinkLocal(*ParseGid(kV4)));
  EXPECT_FALSE(IsLinkLocal(*GidForIp("2001:db8::1")));
}

LocalIpv4 Local(const std::string& netdev, const std::string& ip, int prefix) {
  LocalIpv4 l;
  l.netdev = netdev;
  const Gid g = *GidForIp(ip);
  std::copy(g.begin() + 12, g.end(), l.addr.begin());
  l.prefix_len = prefix;
  return l;
}

// With VLANs (or several addresses) the first RoCE v2 IPv4 entry may be on a subnet the peer
// cannot reach: where the peer's address is known, the entry on its subnet is the one.
TEST(GidTableTest, ByPeerPicksTheEntryOnThePeersSubnet) {
  FakeSysfs sys;
  sys.Port("mlx5_0", 1);
  sys.Entry("mlx5_0", 1, 1, kLinkLocal, "RoCE v2", "eth0");
  sys.Entry("mlx5_0", 1, 3, kV4, "RoCE v2", "eth0");            // 10.11.0.1/24
  sys.Entry("mlx5_0", 1, 5, kV4b, "IB/RoCE v1", "eth0.100");   // 192.168.1.7, v1
  sys.Entry("mlx5_0", 1, 7, kV4b, "RoCE v2", "eth0.100");      // 192.168.1.7/24, VLAN 100
  auto t = ReadGidTable(sys.root(), "mlx5_0", 1, 16);
  ASSERT_TRUE(t.ok());
  GidPick pick;
  pick.local = {Local("eth0", "10.11.0.1", 24), Local("eth0.100", "192.168.1.7", 24),
                Local("lo", "127.0.0.1", 8)};
  pick.peer = *GidForIp("192.168.1.20");
  auto idx = PickRoceV2Gid(*t, pick);
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_EQ(*idx, 7) << "the VLAN whose subnet holds the peer";
  pick.peer = *GidForIp("10.11.0.9");
  EXPECT_EQ(*PickRoceV2Gid(*t, pick), 3);
  // A peer on no local subnet (routed): the first RoCE v2 IPv4 entry, as before.
  pick.peer = *GidForIp("172.16.0.1");
  EXPECT_EQ(*PickRoceV2Gid(*t, pick), 3);
  // The address must sit on the entry's own netdev: the same subnet on another interface
  // says nothing about this GID.
  pick.local = {Local("eth1", "192.168.1.7", 24)};
  pick.peer = *GidForIp("192.168.1.20");
  EXPECT_EQ(*PickRoceV2Gid(*t, pick), 3);
}

TEST(GidTableTest, LinkLocalIsNeverTheAutomaticChoice) {
  FakeSysfs sys;
  sys.Port("mlx5_0", 1);
  sys.Entry("mlx5_0", 1, 1, kLinkLocal, "RoCE v2", "eth0");
  sys.Entry("mlx5_0", 1, 2, "2001:0db8:0000:0000:0000:0000:0000:0001", "RoCE v2", "eth0");
  auto t = ReadGidTable(sys.root(), "mlx5_0", 1, 16);
  ASSERT_TRUE(t.ok());
  auto idx = PickRoceV2Gid(*t, std::nullopt);
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_EQ(*idx, 2) << "the global IPv6 GID, not the link-local one before it";
}

// The old last fallback returned a link-local GID: it reaches no other subnet and is not an
// address the peer picked. Refused, naming what to set instead.
TEST(GidTableTest, OnlyLinkLocalRoceV2IsRefusedNamingTheFlags) {
  FakeSysfs sys;
  sys.Port("rxe0", 1);
  sys.Entry("rxe0", 1, 0, kLinkLocal, "IB/RoCE v1", "veth0");
  sys.Entry("rxe0", 1, 1, kLinkLocal, "RoCE v2", "veth0");
  auto t = ReadGidTable(sys.root(), "rxe0", 1, 16);
  ASSERT_TRUE(t.ok());
  absl::StatusOr<int> idx = PickRoceV2Gid(*t, std::nullopt);
  ASSERT_FALSE(idx.ok()) << "picked " << *idx;
  EXPECT_EQ(idx.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string m(idx.status().message());
  EXPECT_NE(m.find("link-local"), std::string::npos) << m;
  EXPECT_NE(m.find("--rdma-gid-index"), std::string::npos) << m;
  EXPECT_NE(m.find("--rdma-addr"), std::string::npos) << m;
  EXPECT_NE(m.find("veth0"), std::string::npos) << m;
}

TEST(GidTableTest, NoRoceV2EntryIsNotFound) {
  FakeSysfs sys;
  sys.Port("rxe0", 1);
  sys.Entry("rxe0", 1, 0, kLinkLocal, "IB/RoCE v1", "veth0");
  auto t = ReadGidTable(sys.root(), "rxe0", 1, 16);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(PickRoceV2Gid(*t, std::nullopt).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gdr::verbs
