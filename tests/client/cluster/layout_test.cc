// The placement rule every client must compute alike, and the checks a layout entry passes.
#include "client/src/cluster/layout.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "absl/strings/match.h"

namespace gdr::cluster {
namespace {

namespace v1 = gdrstore::v1;

v1::ClusterVolume Layout(uint64_t unit, std::vector<std::string> members, uint32_t replicas,
                         uint64_t rows) {
  v1::ClusterVolume l;
  l.set_name("ckpt");
  l.set_stripe_unit(unit);
  for (auto& m : members) l.add_members(m);
  l.set_replicas(replicas);
  l.set_epoch(1);
  l.set_size(rows * unit * l.members_size());
  return l;
}

TEST(ClusterLayoutTest, PiecesCoverTheRangeInOrderAndEndAtStripeBoundaries) {
  const auto l = Layout(4096, {"a", "b", "c"}, 1, 10);
  auto pieces = Split(l, 4096 * 2 + 100, 3 * 4096);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  ASSERT_EQ(pieces->size(), 4u);
  uint64_t next = 0;
  for (const Piece& p : *pieces) {
    EXPECT_EQ(p.op_offset, next);
    EXPECT_LE(p.length, 4096u);
    next += p.length;
  }
  EXPECT_EQ(next, 3u * 4096);
  EXPECT_EQ((*pieces)[0].length, 4096u - 100);  // to the end of stripe 2
  EXPECT_EQ((*pieces)[0].stripe, 2u);
  EXPECT_EQ((*pieces)[0].replicas[0].member, 2u);
  EXPECT_EQ((*pieces)[0].replicas[0].offset, 100u);  // row 0 of member c
  EXPECT_EQ((*pieces)[1].stripe, 3u);
  EXPECT_EQ((*pieces)[1].replicas[0].member, 0u);  // row 1 of member a
  EXPECT_EQ((*pieces)[1].replicas[0].offset, 4096u);
}

TEST(ClusterLayoutTest, EveryMemberByteHoldsExactlyOneStripeReplica) {
  // Over the whole volume, no two (stripe, replica) pairs land on the same member bytes and
  // every member is filled to the same depth: the rule neither overlaps nor wastes.
  for (uint32_t r : {1u, 2u, 3u}) {
    const auto l = Layout(4096, {"a", "b", "c"}, r, 6);
    auto pieces = Split(l, 0, l.size());
    ASSERT_TRUE(pieces.ok()) << pieces.status();
    std::set<std::pair<uint32_t, uint64_t>> used;
    std::map<uint32_t, uint64_t> top;
    for (const Piece& p : *pieces) {
      ASSERT_EQ(p.replicas.size(), r);
      std::set<uint32_t> members;
      for (const Placement& at : p.replicas) {
        EXPECT_TRUE(used.insert({at.member, at.offset}).second)
            << "member " << at.member << " byte " << at.offset << " used twice (R=" << r << ")";
        EXPECT_TRUE(members.insert(at.member).second) << "two replicas on one member";
        top[at.member] = std::max(top[at.member], at.offset + p.length);
      }
    }
    for (const auto& [m, bytes] : top) {
      EXPECT_EQ(bytes, 6u * r * 4096) << "member " << m << " R=" << r;
    }
  }
}

TEST(ClusterLayoutTest, LogicalSizeIsWholeRowsOfTheSmallestMember) {
  EXPECT_EQ(LogicalSize(4 << 20, 3, 1, 256ull << 20), 3 * (256ull << 20));
  EXPECT_EQ(LogicalSize(4 << 20, 3, 2, 256ull << 20), 3 * (128ull << 20));
  EXPECT_EQ(LogicalSize(4 << 20, 3, 1, (4 << 20) - 1), 0u);
}

TEST(ClusterLayoutTest, RangesOutsideTheVolumeAreRefused) {
  const auto l = Layout(4096, {"a", "b"}, 1, 2);
  EXPECT_TRUE(absl::IsOutOfRange(Split(l, l.size() - 1, 2).status()));
  EXPECT_TRUE(absl::IsOutOfRange(Split(l, UINT64_MAX, 2).status()));
  EXPECT_TRUE(Split(l, l.size(), 0).ok());
}

TEST(ClusterLayoutTest, MalformedLayoutsAreRefusedNamingTheKeyAndField) {
  struct Case {
    const char* json;
    const char* names;
  } cases[] = {
      {"not json", "/c/volumes/ckpt"},
      {R"({"name":"ckpt","stripe_unit":"5000","members":["a"],"replicas":1,"size":"5000"})",
       "stripe_unit"},
      {R"({"name":"ckpt","stripe_unit":"4096","members":[],"replicas":1,"size":"4096"})",
       "members"},
      {R"({"name":"ckpt","stripe_unit":"4096","members":["a","a"],"replicas":1,"size":"8192"})",
       "listed twice"},
      {R"({"name":"ckpt","stripe_unit":"4096","members":["a"],"replicas":2,"size":"4096"})",
       "replicas"},
      {R"({"name":"ckpt","stripe_unit":"4096","members":["a","b"],"replicas":1,"size":"4096"})",
       "size"},
      {R"({"name":"other","stripe_unit":"4096","members":["a"],"replicas":1,"size":"4096"})",
       "names volume"},
      {R"({"name":"ckpt","stripe_unit":"4096","members":["a"],"replicas":"many","size":"4096"})",
       "/c/volumes/ckpt"},
  };
  for (const Case& c : cases) {
    auto l = ParseLayout("/c/volumes/ckpt", c.json);
    ASSERT_FALSE(l.ok()) << c.json;
    EXPECT_TRUE(absl::IsInvalidArgument(l.status())) << l.status();
    EXPECT_TRUE(absl::StrContains(l.status().message(), "/c/volumes/ckpt")) << l.status();
    EXPECT_TRUE(absl::StrContains(l.status().message(), c.names)) << l.status();
  }
  auto good = ParseLayout(
      "/c/volumes/ckpt",
      R"({"name":"ckpt","stripe_unit":"4096","members":["a","b"],"replicas":2,"size":"8192"})");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->members_size(), 2);
}

TEST(ClusterLayoutTest, MemberEntriesNeedTheirIdAndAnAddress) {
  EXPECT_TRUE(ParseMember("/c/members/a", R"({"id":"a","address":"127.0.0.1:5000"})").ok());
  auto wrong_id = ParseMember("/c/members/a", R"({"id":"b","address":"127.0.0.1:5000"})");
  EXPECT_TRUE(absl::StrContains(wrong_id.status().message(), "/c/members/a"));
  auto no_port = ParseMember("/c/members/a", R"({"id":"a","address":"127.0.0.1"})");
  EXPECT_TRUE(absl::StrContains(no_port.status().message(), "address"));
}

}  // namespace
}  // namespace gdr::cluster
