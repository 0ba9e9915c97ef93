#include "common/base/host_port.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace gdr {
namespace {

TEST(HostPortTest, SplitsEveryForm) {
  auto v4 = SplitHostPort("10.0.0.7:50051");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->host, "10.0.0.7");
  EXPECT_EQ(v4->port, 50051);
  auto name = SplitHostPort("storage-3:1");
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(name->host, "storage-3");
  EXPECT_EQ(name->port, 1);
  auto v6 = SplitHostPort("[fe80::1]:65535");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "fe80::1");
  EXPECT_EQ(v6->port, 65535);
}

TEST(HostPortTest, RefusesWhatIsNotOneAddress) {
  for (const char* bad : {"", "host", ":50051", "host:", "host:0", "host:65536", "host:12ab",
                          "host:50051:50051", "::1:50051", "[::1]", "[::1]50051", "[::1:50051",
                          "[]:50051"}) {
    auto r = SplitHostPort(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(r.status().message(), std::string("'") + bad + "'"))
        << r.status();
  }
}

TEST(HostPortTest, JoinBracketsV6AndRoundTrips) {
  EXPECT_EQ(JoinHostPort("127.0.0.1", 80), "127.0.0.1:80");
  EXPECT_EQ(JoinHostPort("::1", 80), "[::1]:80");
  for (const char* a : {"127.0.0.1:80", "[fe80::1]:9", "localhost:50051"}) {
    auto r = SplitHostPort(a);
    ASSERT_TRUE(r.ok()) << a;
    EXPECT_EQ(JoinHostPort(r->host, r->port), a);
  }
}

TEST(HostPortTest, LoopbackHosts) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.3.2.1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_FALSE(IsLoopbackHost("10.0.0.1"));
  EXPECT_FALSE(IsLoopbackHost("fe80::1"));
}

}  // namespace
}  // namespace gdr
