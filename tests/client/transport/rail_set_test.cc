// RailSet's choices, with sessions that stand in for rc connections on RDMA devices this
// machine does not have: how ops are cut and spread by speed, small ops kept to the rails near
// their memory, a failed rail passed over and taken back, registration on every rail. And
// RunSliced: one answer per op, a failed slice resubmitted once on another rail, and only for
// failures another rail may cure.
#include "client/src/transport/rail_set.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "client/src/sliced_op.h"

namespace gdr {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// A rail's session: registers with its own rkey and names its connection in descriptors.
class FakeRailSession final : public ClientTransport {
 public:
  explicit FakeRailSession(uint32_t id) : id_(id) {}
  absl::StatusOr<std::function<void()>> Register(const std::shared_ptr<Region>& region) override {
    if (fail_register) return absl::ResourceExhaustedError("memlock");
    region->rkey = 0x1000 + id_;
    ++registered;
    return std::function<void()>([this] { ++withdrawn; });
  }
  void DescribeEndpoint(gdrstore::v1::RemoteBuffer* buffer) const override {
    buffer->mutable_rc()->set_connection_id(id_);
  }
  std::string HopTo(const Region& region, int rail) const override {
    return absl::StrCat("rc:fake", id_, "/host");
  }
  void Close() override { closed = true; }
  bool fail_register = false;
  int registered = 0, withdrawn = 0;
  bool closed = false;

 private:
  uint32_t id_;
};

struct Fixture {
  std::vector<std::shared_ptr<FakeRailSession>> sessions;
  std::unique_ptr<RailSet> set;
};

Fixture Make(std::vector<uint64_t> speeds, std::chrono::milliseconds retry = std::chrono::hours(1)) {
  Fixture f;
  std::vector<RailSet::Rail> rails;
  for (size_t i = 0; i < speeds.size(); ++i) {
    f.sessions.push_back(std::make_shared<FakeRailSession>(static_cast<uint32_t>(i + 1)));
    rails.push_back(RailSet::Rail{f.sessions.back(), "nic" + std::to_string(i),
                                  "d" + std::to_string(i) + " port 1", speeds[i]});
  }
  RailSet::Options o;
  o.slice_bytes = kMiB;
  o.retry = retry;
  o.sysfs_root = "/nonexistent";
  f.set = std::make_unique<RailSet>(std::move(rails), o);
  return f;
}

std::shared_ptr<Region> HostRegion(size_t size) {
  auto r = std::make_shared<Region>();
  r->base = 0x10000;
  r->size = size;
  return r;
}

std::map<int, uint64_t> BytesPerRail(const std::vector<ClientTransport::Slice>& slices,
                                     uint64_t length) {
  std::map<int, uint64_t> bytes;
  uint64_t next = 0;
  for (const auto& s : slices) {
    EXPECT_EQ(s.offset, next) << "slices must tile the op in order";
    next += s.length;
    bytes[s.rail] += s.length;
  }
  EXPECT_EQ(next, length);
  return bytes;
}

TEST(RailSetTest, RegistersOnEveryRailAndDescribesEachWithItsOwnKey) {
  Fixture f = Make({100000, 100000});
  auto region = HostRegion(kMiB);
  auto withdraw = f.set->Register(region);
  ASSERT_TRUE(withdraw.ok()) << withdraw.status();
  ASSERT_EQ(region->rail_rkeys, (std::vector<uint32_t>{0x1001, 0x1002}));
  EXPECT_EQ(region->near_rails, (std::vector<int>{0, 1})) << "host memory: every rail is near";
  for (int rail : {0, 1}) {
    gdrstore::v1::RemoteBuffer rb;
    f.set->DescribeEndpoint(*region, rail, &rb);
    EXPECT_EQ(rb.rkey(), 0x1001u + rail);
    EXPECT_EQ(rb.rc().connection_id(), 1u + rail);
  }
  (*withdraw)();
  EXPECT_EQ(f.sessions[0]->withdrawn + f.sessions[1]->withdrawn, 2);
}

TEST(RailSetTest, ARailThatCannotRegisterFailsTheRegistrationNamingIt) {
  Fixture f = Make({100000, 100000});
  f.sessions[1]->fail_register = true;
  auto withdraw = f.set->Register(HostRegion(kMiB));
  ASSERT_FALSE(withdraw.ok());
  EXPECT_EQ(withdraw.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(withdraw.status().message().find("nic1"), std::string::npos) << withdraw.status();
  EXPECT_EQ(f.sessions[0]->withdrawn, 1) << "the rail that had registered withdraws";
}

TEST(RailSetTest, LargeOpsAreSpreadInProportionToSpeed) {
  Fixture f = Make({100000, 200000, 100000});
  auto region = HostRegion(64 * kMiB);
  ASSERT_TRUE(f.set->Register(region).ok());
  const uint64_t length = 64 * kMiB + 12345;
  const auto bytes = BytesPerRail(f.set->Plan(*region, length), length);
  ASSERT_EQ(bytes.size(), 3u);
  EXPECT_NEAR(double(bytes.at(1)) / double(length), 0.5, 0.02);
  EXPECT_NEAR(double(bytes.at(0)) / double(length), 0.25, 0.02);
  EXPECT_NEAR(double(bytes.at(2)) / double(length), 0.25, 0.02);
}

TEST(RailSetTest, UnknownSpeedsShareEqually) {
  Fixture f = Make({0, 0});
  auto region = HostRegion(8 * kMiB);
  ASSERT_TRUE(f.set->Register(region).ok());
  const auto bytes = BytesPerRail(f.set->Plan(*region, 8 * kMiB), 8 * kMiB);
  EXPECT_EQ(bytes.at(0), 4 * kMiB);
  EXPECT_EQ(bytes.at(1), 4 * kMiB);
}

TEST(RailSetTest, SmallOpsGoWholeToANearRailInTurn) {
  Fixture f = Make({100000, 100000, 100000});
  auto region = HostRegion(kMiB);
  ASSERT_TRUE(f.set->Register(region).ok());
  region->near_rails = {1, 2};  // as the topology would set for a GPU between them
  std::map<int, int> used;
  for (int i = 0; i < 10; ++i) {
    auto slices = f.set->Plan(*region, kMiB - 1);
    ASSERT_EQ(slices.size(), 1u);
    EXPECT_EQ(slices[0].length, kMiB - 1);
    ++used[slices[0].rail];
  }
  EXPECT_EQ(used.count(0), 0u);
  EXPECT_EQ(used[1], 5);
  EXPECT_EQ(used[2], 5);
}

TEST(RailSetTest, AFailedRailIsPassedOverUntilItsRetryTime) {
  Fixture f = Make({100000, 100000});
  auto region = HostRegion(8 * kMiB);
  ASSERT_TRUE(f.set->Register(region).ok());
  std::optional<int> other = f.set->Reroute(1, absl::UnavailableError("rail d1 is DOWN"));
  ASSERT_EQ(other, 0);
  for (const auto& s : f.set->Plan(*region, 8 * kMiB)) EXPECT_EQ(s.rail, 0);
  auto stats = f.set->rail_stats();
  EXPECT_TRUE(stats[1].passed_over);
  EXPECT_FALSE(stats[0].passed_over);
  // Every rail failed: all are tried again rather than none (the daemon then says why).
  EXPECT_EQ(f.set->Reroute(0, absl::UnavailableError("x")), 1);
  EXPECT_EQ(BytesPerRail(f.set->Plan(*region, 8 * kMiB), 8 * kMiB).size(), 2u);
}

TEST(RailSetTest, ARailIsTakenBackOnceItsRetryTimeHasPassed) {
  Fixture f = Make({100000, 100000}, std::chrono::milliseconds(0));
  auto region = HostRegion(8 * kMiB);
  ASSERT_TRUE(f.set->Register(region).ok());
  ASSERT_EQ(f.set->Reroute(1, absl::UnavailableError("down")), 0);
  EXPECT_EQ(BytesPerRail(f.set->Plan(*region, 8 * kMiB), 8 * kMiB).size(), 2u);
}

// RunSliced over a RailSet: answers from a table of (rail -> status) and the slices seen.
struct Recorder {
  std::mutex mu;
  std::vector<ClientTransport::Slice> seen;
  std::map<int, absl::Status> fail;  // rail -> what it answers
};

SliceSubmit Answering(Recorder* rec) {
  return [rec](const ClientTransport::Slice& s, gdrstore::OpCallback done) {
    absl::Status st;
    {
      std::lock_guard<std::mutex> lock(rec->mu);
      rec->seen.push_back(s);
      if (auto it = rec->fail.find(s.rail); it != rec->fail.end()) st = it->second;
    }
    if (st.ok()) {
      done(gdrstore::OpResult{s.length, 10 + s.offset / kMiB, true, std::nullopt, ""});
    } else {
      done(st);
    }
  };
}

absl::StatusOr<gdrstore::OpResult> RunOp(const std::shared_ptr<RailSet>& set,
                                         const std::shared_ptr<Region>& region, uint64_t length,
                                       Recorder* rec) {
  absl::StatusOr<gdrstore::OpResult> out = absl::UnknownError("no answer");
  int answers = 0;
  RunSliced(set, set->Plan(*region, length), Answering(rec),
            [&](absl::StatusOr<gdrstore::OpResult> r) {
              out = std::move(r);
              ++answers;
            });
  EXPECT_EQ(answers, 1);
  return out;
}

std::shared_ptr<RailSet> Shared(Fixture& f) { return std::shared_ptr<RailSet>(std::move(f.set)); }

TEST(SlicedOpTest, OneAnswerWithEveryByteAndTheLongestServiceTime) {
  Fixture f = Make({100000, 100000});
  auto set = Shared(f);
  auto region = HostRegion(8 * kMiB);
  ASSERT_TRUE(set->Register(region).ok());
  Recorder rec;
  auto r = RunOp(set, region, 8 * kMiB, &rec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bytes, 8 * kMiB);
  EXPECT_EQ(r->service_ns, 17u);
  EXPECT_TRUE(r->synced);
  EXPECT_EQ(rec.seen.size(), 8u);
  auto stats = set->rail_stats();
  EXPECT_EQ(stats[0].bytes + stats[1].bytes, 8 * kMiB);
  EXPECT_EQ(stats[0].ops + stats[1].ops, 8u);
}

TEST(SlicedOpTest, SlicesOfAFailingRailAreResubmittedOnceElsewhereAndCounted) {
  Fixture f = Make({100000, 100000});
  auto set = Shared(f);
  auto region = HostRegion(8 * kMiB);
  ASSERT_TRUE(set->Register(region).ok());
  Recorder rec;
  rec.fail[1] = absl::UnavailableError("rail d1 port 1 is DOWN");
  auto r = RunOp(set, region, 8 * kMiB, &rec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->bytes, 8 * kMiB);
  auto stats = set->rail_stats();
  EXPECT_EQ(stats[1].errors, 4u);
  EXPECT_EQ(stats[0].resubmitted, 4u);
  EXPECT_EQ(stats[0].bytes, 8 * kMiB);
}

TEST(SlicedOpTest, ASliceFailingOnBothRailsFailsTheOpNamingTheSlice) {
  Fixture f = Make({100000, 100000});
  auto set = Shared(f);
  auto region = HostRegion(4 * kMiB);
  ASSERT_TRUE(set->Register(region).ok());
  Recorder rec;
  rec.fail[0] = absl::UnavailableError("rail d0 is DOWN");
  rec.fail[1] = absl::UnavailableError("rail d1 is DOWN");
  auto r = RunOp(set, region, 4 * kMiB, &rec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("slice ["), std::string::npos) << r.status();
  EXPECT_EQ(rec.seen.size(), 8u) << "each of 4 slices tried twice, never more";
}

TEST(SlicedOpTest, ARequestErrorIsNotRetried) {
  Fixture f = Make({100000, 100000});
  auto set = Shared(f);
  auto region = HostRegion(kMiB);
  ASSERT_TRUE(set->Register(region).ok());
  Recorder rec;
  rec.fail[0] = rec.fail[1] = absl::OutOfRangeError("extent past the volume's end");
  auto r = RunOp(set, region, 4096, &rec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(r.status().message(), "extent past the volume's end") << "one slice: no prefix";
  EXPECT_EQ(rec.seen.size(), 1u);
  EXPECT_FALSE(set->rail_stats()[rec.seen[0].rail].passed_over);
}

}  // namespace
}  // namespace gdr
