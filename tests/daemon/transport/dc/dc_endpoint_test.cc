#include "daemon/transport/dc/dc_endpoint.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gdr::dc {
namespace {

gdrstore::v1::DcEndpoint Endpoint() {
  gdrstore::v1::DcEndpoint e;
  e.set_dct_number(0xABCDE);
  e.set_dc_key(0x1122334455667788ull);
  std::string gid(16, '\0');
  gid[0] = '\xfe';
  gid[1] = '\x80';
  gid[15] = '\x01';
  e.set_gid(gid);
  return e;
}

TEST(DcEndpointTest, ParsesAValidRoceEndpoint) {
  auto d = ParseDcEndpoint(Endpoint());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->key.dct_number, 0xABCDEu);
  EXPECT_EQ(d->key.addr.gid[0], 0xfe);
  EXPECT_EQ(d->key.addr.gid[15], 0x01);
  EXPECT_EQ(d->access_key.value(), 0x1122334455667788ull);
}

TEST(DcEndpointTest, InfinibandEndpointNeedsOnlyALid) {
  gdrstore::v1::DcEndpoint e = Endpoint();
  e.clear_gid();
  e.set_lid(17);
  auto d = ParseDcEndpoint(e);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->key.addr.lid, 17);
}

TEST(DcEndpointTest, RejectsHostileFields) {
  auto bad = [](auto mutate) {
    gdrstore::v1::DcEndpoint e = Endpoint();
    mutate(e);
    return ParseDcEndpoint(e).status();
  };
  using E = gdrstore::v1::DcEndpoint;
  EXPECT_EQ(bad([](E& e) { e.set_dct_number(0); }).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](E& e) { e.set_dct_number(0x1000000); }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](E& e) { e.set_gid(std::string(15, 'x')); }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](E& e) { e.set_gid(std::string(17, 'x')); }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](E& e) { e.set_lid(0x10000); }).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad([](E& e) { e.set_gid(std::string(16, '\0')); }).code(),
            absl::StatusCode::kInvalidArgument);
  // No error message quotes the key.
  absl::Status s = bad([](E& e) { e.set_dct_number(0); });
  EXPECT_EQ(s.message().find(absl::StrCat(0x1122334455667788ull)), std::string::npos);
  EXPECT_EQ(s.message().find("1122334455667788"), std::string::npos);
}

TEST(DcEndpointTest, MtuIsAPathMtuOrAbsent) {
  gdrstore::v1::DcEndpoint e = Endpoint();
  auto absent = ParseDcEndpoint(e);
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_EQ(absent->mtu, 0u) << "an older client sends none";
  for (uint32_t mtu : {256u, 512u, 1024u, 2048u, 4096u}) {
    e.set_mtu(mtu);
    auto d = ParseDcEndpoint(e);
    ASSERT_TRUE(d.ok()) << mtu << ": " << d.status();
    EXPECT_EQ(d->mtu, mtu);
  }
  for (uint32_t mtu : {1u, 1500u, 9000u, 8192u, 0xFFFFFFFFu}) {
    e.set_mtu(mtu);
    absl::Status s = ParseDcEndpoint(e).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << mtu;
    EXPECT_NE(s.message().find("buffer.dc.mtu"), std::string::npos) << s;
  }
}

TEST(DcEndpointTest, DescribeDestNeverIncludesTheKey) {
  auto d = ParseDcEndpoint(Endpoint());
  ASSERT_TRUE(d.ok());
  const std::string text = DescribeDest(d->key);
  EXPECT_NE(text.find("DCT 0x0abcde"), std::string::npos) << text;
  EXPECT_NE(text.find("fe80:"), std::string::npos) << text;
  EXPECT_EQ(text.find("1122334455667788"), std::string::npos) << text;
}

}  // namespace
}  // namespace gdr::dc
