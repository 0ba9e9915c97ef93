// ClientStats: identities from labels and gRPC peers, and the bound on how many
// are tracked.
#include "daemon/observe/client_stats.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gdr {
namespace {

namespace v1 = gdrstore::v1;

TEST(ClientIdentityTest, LabelElseAddressWithoutPort) {
  EXPECT_EQ(ClientIdentity("alice", "ipv4:10.0.0.7:41234"), "alice");
  EXPECT_EQ(ClientIdentity("", "ipv4:10.0.0.7:41234"), "10.0.0.7");
  EXPECT_EQ(ClientIdentity("", "ipv6:[fd00::7]:41234"), "fd00::7");
  EXPECT_EQ(ClientIdentity("", "ipv6:[::ffff:127.0.0.1]:5"), "127.0.0.1");
  EXPECT_EQ(ClientIdentity("", "unix:/run/gdrstored.sock"), "unix");
  EXPECT_EQ(ClientIdentity("", "inproc"), "unknown");
}

TEST(ClientStatsTest, SameIdentitySameCountersAndBoundedThenOther) {
  ClientStats s;
  OpCounters* a = s.Resolve("10.0.0.1");
  EXPECT_EQ(s.Resolve("10.0.0.1"), a);
  a->Finished(Direction::kStoreToClient, absl::StatusCode::kOk, 100, 1000, false);
  for (size_t i = 2; i <= ClientStats::kMaxClients; ++i) s.Resolve(absl::StrCat("10.0.0.", i));
  // The 65th identity and every later one share one entry.
  OpCounters* late = s.Resolve("10.0.1.1");
  EXPECT_NE(late, a);
  EXPECT_EQ(s.Resolve("10.0.1.2"), late);
  late->Finished(Direction::kClientToStore, absl::StatusCode::kOk, 7, 1000, false);
  late->Finished(Direction::kClientToStore, absl::StatusCode::kOk, 7, 1000, false);
  // The first ones keep their own.
  EXPECT_EQ(s.Resolve("10.0.0.1"), a);

  google::protobuf::RepeatedPtrField<v1::ClientStats> out;
  s.Fill(&out);
  ASSERT_EQ(out.size(), static_cast<int>(ClientStats::kMaxClients) + 1);
  EXPECT_EQ(out[0].client(), "10.0.0.1");
  EXPECT_EQ(out[0].ops().write_bytes(), 100u);
  EXPECT_EQ(out[out.size() - 1].client(), ClientStats::kOther);
  EXPECT_EQ(out[out.size() - 1].ops().read_ops(), 2u);
  EXPECT_EQ(out[out.size() - 1].ops().read_bytes(), 14u);
}

TEST(ClientStatsTest, OtherIsListedOnlyOnceUsed) {
  ClientStats s;
  s.Resolve("alice");
  google::protobuf::RepeatedPtrField<v1::ClientStats> out;
  s.Fill(&out);
  ASSERT_EQ(out.size(), 1);
  EXPECT_EQ(out[0].client(), "alice");
}

}  // namespace
}  // namespace gdr
