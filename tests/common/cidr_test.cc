// Unit tests of IpAddress (common/base/ip_address.h) and Cidr (common/base/cidr.h): parsing, the
// IPv4-mapped normal form, prefix matching and the errors an operator sees.
#include "common/base/cidr.h"

#include <netinet/in.h>

#include "absl/strings/str_cat.h"
#include "common/base/ip_address.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;

IpAddress Ip(const char* text) {
  absl::StatusOr<IpAddress> a = IpAddress::Parse(text);
  EXPECT_TRUE(a.ok()) << text << ": " << a.status();
  return a.ok() ? *a : IpAddress();
}

TEST(IpAddressTest, ParsesBothFamiliesAndNormalisesMappedIpv4) {
  EXPECT_EQ(Ip("10.0.0.7"), Ip("::ffff:10.0.0.7"));
  EXPECT_TRUE(Ip("::ffff:10.0.0.7").is_v4());
  EXPECT_EQ(Ip("::ffff:10.0.0.7").ToString(), "10.0.0.7");
  EXPECT_FALSE(Ip("fd00::7").is_v4());
  EXPECT_EQ(Ip("FD00:0:0::7").ToString(), "fd00::7");
  EXPECT_NE(Ip("10.0.0.7"), Ip("10.0.0.8"));
  EXPECT_TRUE(Ip("127.3.2.1").IsLoopback());
  EXPECT_TRUE(Ip("::1").IsLoopback());
  EXPECT_TRUE(Ip("::ffff:127.0.0.1").IsLoopback());
  EXPECT_FALSE(Ip("::2").IsLoopback());
  EXPECT_FALSE(Ip("128.0.0.1").IsLoopback());
}

TEST(IpAddressTest, RefusesNamesBracketsZonesAndGarbage) {
  for (const char* bad : {"", "localhost", "[::1]", "fe80::1%eth0", "10.0.0", "10.0.0.256",
                          "1.2.3.4 ", "::1::2", "0x7f.1"}) {
    absl::StatusOr<IpAddress> a = IpAddress::Parse(bad);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(IpAddress::Parse(std::string(1000, '1')).ok());
  EXPECT_THAT(IpAddress::Parse(std::string("a\x01z", 3)).status().message(), HasSubstr("a?z"));
}

TEST(IpAddressTest, FromSockaddrOfEachFamily) {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_addr.s_addr = htonl(0x0a000007);
  absl::StatusOr<IpAddress> a =
      IpAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&v4), sizeof(v4));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, Ip("10.0.0.7"));
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_addr.s6_addr[15] = 1;
  a = IpAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&v6), sizeof(v6));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, Ip("::1"));
  sockaddr un{};
  un.sa_family = AF_UNIX;
  EXPECT_FALSE(IpAddress::FromSockaddr(&un, sizeof(un)).ok());
  EXPECT_FALSE(IpAddress::FromSockaddr(reinterpret_cast<sockaddr*>(&v4), 4).ok());
}

TEST(CidrTest, MatchesPrefixesOfEitherFamily) {
  const Cidr lo = *Cidr::Parse("127.0.0.0/8");
  EXPECT_TRUE(lo.Contains(Ip("127.0.0.2")));
  EXPECT_TRUE(lo.Contains(Ip("::ffff:127.255.0.1")));  // mapped form matches an IPv4 prefix
  EXPECT_FALSE(lo.Contains(Ip("128.0.0.1")));
  EXPECT_FALSE(lo.Contains(Ip("::1")));
  EXPECT_EQ(lo.ToString(), "127.0.0.0/8");

  const Cidr odd = *Cidr::Parse("10.1.2.128/25");
  EXPECT_TRUE(odd.Contains(Ip("10.1.2.255")));
  EXPECT_FALSE(odd.Contains(Ip("10.1.2.127")));

  const Cidr v6 = *Cidr::Parse("fd00:1::/32");
  EXPECT_TRUE(v6.Contains(Ip("fd00:1:ffff::9")));
  EXPECT_FALSE(v6.Contains(Ip("fd00:2::9")));
  EXPECT_FALSE(v6.Contains(Ip("10.0.0.1")));

  const Cidr host = *Cidr::Parse("192.168.1.9");  // a bare address is one host
  EXPECT_EQ(host.ToString(), "192.168.1.9/32");
  EXPECT_TRUE(host.Contains(Ip("192.168.1.9")));
  EXPECT_FALSE(host.Contains(Ip("192.168.1.8")));

  EXPECT_TRUE(Cidr::Parse("0.0.0.0/0")->Contains(Ip("8.8.8.8")));
  EXPECT_FALSE(Cidr::Parse("0.0.0.0/0")->Contains(Ip("fd00::1")));
  EXPECT_TRUE(Cidr::Parse("::/0")->Contains(Ip("fd00::1")));
  EXPECT_EQ(*Cidr::Parse("::ffff:10.0.0.0/104"), *Cidr::Parse("10.0.0.0/8"));
}

TEST(CidrTest, RefusesWhatIsNotAPrefixWithAClearMessage) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"10.0.0.1/8", "did you mean 10.0.0.0/8"},
      {"fd00::1/8", "did you mean fd00::/8"},
      {"10.0.0.0/33", "0..32"},
      {"fd00::/129", "0..128"},
      {"10.0.0.0/", "0..32"},
      {"10.0.0.0/-1", "0..32"},
      {"10.0.0.0/8/8", "0..32"},
      {"10.0.0.0/+8", "0..32"},
      {"host.example/8", "not an IPv4 or IPv6 address"},
      {"", "not an IPv4 or IPv6 address"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Cidr> r = Cidr::Parse(c.text);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.says)) << c.text;
  }
}

// Found by address_fuzz: the prefix length was quoted as written, control bytes and all, into
// a message that goes to the log. It is escaped now.
TEST(CidrTest, ABadPrefixLengthIsQuotedEscaped) {
  const std::string text("10.0.0.0/\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x33\x33", 21);
  absl::StatusOr<Cidr> r = Cidr::Parse(text);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("0..32"));
  EXPECT_THAT(r.status().message(), HasSubstr("10.0.0.0/\\xff"));
  for (char c : r.status().message()) EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << int(c);
  absl::StatusOr<Cidr> newline = Cidr::Parse("10.0.0.0/\n8");
  ASSERT_FALSE(newline.ok());
  EXPECT_THAT(newline.status().message(), HasSubstr("10.0.0.0/\\n8"));
}

// Found by address_fuzz: an IPv4-mapped prefix written as IPv6 with host bits set was told to
// use "0.0.0.0/100" (no IPv4 prefix is 100 bits long) or, for /8, an IPv4 range that does not
// hold the address. The suggestion keeps the ::ffff: spelling, parses, and holds the address.
TEST(CidrTest, AMappedPrefixWithHostBitsSuggestsOneThatParses) {
  struct Case {
    const char* text;
    const char* meant;
  } cases[] = {
      {"::ffff:10.0.0.1/100", "::ffff:0.0.0.0/100"},
      {"::ffff:10.0.0.1/104", "::ffff:10.0.0.0/104"},
      {"::ffff:10.0.0.0/8", "::/8"},
      {"::ffff:10.1.2.3/120", "::ffff:10.1.2.0/120"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Cidr> r = Cidr::Parse(c.text);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(absl::StrCat("did you mean ", c.meant, "?")))
        << c.text;
    absl::StatusOr<Cidr> meant = Cidr::Parse(c.meant);
    ASSERT_TRUE(meant.ok()) << meant.status();
    absl::StatusOr<IpAddress> written = IpAddress::Parse(absl::string_view(c.text).substr(
        0, absl::string_view(c.text).find('/')));
    ASSERT_TRUE(written.ok());
    EXPECT_TRUE(meant->Contains(*written)) << c.text;
  }
}

}  // namespace
}  // namespace gdr
