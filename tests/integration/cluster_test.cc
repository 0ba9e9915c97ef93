// A cluster of real daemons on loopback registered in a real etcd (Debian's etcd-server):
// striped and replicated ops through ClusterClient, members killed and restarted, etcd taken
// away, volumes made and deleted at run time following into the member entry, and bad input
// (etcd over TLS: cluster_tls_test).
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstddef>
#include <map>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/etcd/etcd_client.h"
#include "gdrstore/cluster.h"
#include "tests/common/etcd_server.h"
#include "tests/integration/cluster_ops.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr int64_t kTtlS = 3;

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status st = EtcdServer::Available(); !st.ok()) GTEST_SKIP() << st.message();
    auto etcd = EtcdServer::Create();
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = std::move(*etcd);
    auto dir = TempDir::Create("cluster");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
    for (int i = 0; i < 3; ++i) {
      absl::Status st = StartMember(i);
      ASSERT_TRUE(st.ok()) << st;
    }
  }

  std::string url() const { return etcd_->url("gdr-test"); }

  // Member i: id m<i>, a file-backed 160 MiB volume (its bytes survive a restart).
  absl::Status StartMember(int i) {
    auto d = DaemonProcess::Start(
        {"--cluster", url(), "--cluster-id", absl::StrCat("m", i), "--cluster-ttl",
         absl::StrCat(kTtlS), "--volume",
         absl::StrCat("vol0=160MiB,file=", dir_->File(absl::StrCat("m", i, ".vol")))});
    if (!d.ok()) return d.status();
    members_[i] = std::move(*d);
    return absl::OkStatus();
  }

  std::unique_ptr<gdrstore::ClusterClient> Open() {
    gdrstore::ClusterOptions o;
    o.etcd_url = url();
    o.member_retry = std::chrono::milliseconds(200);
    auto c = gdrstore::ClusterClient::Open(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  // Waits until the client sees `n` members present.
  static bool SeesPresent(gdrstore::ClusterClient& c, size_t n, absl::Duration timeout) {
    return PollUntil(
        [&] {
          size_t present = 0;
          for (const auto& m : c.Members()) present += m.present;
          return present == n;
        },
        timeout, absl::Milliseconds(100));
  }

  std::unique_ptr<EtcdServer> etcd_;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<DaemonProcess> members_[3];
};


TEST_F(ClusterTest, MembersRegisterAndStripedOpsAreVerifiedWithEveryMemberCarryingItsShare) {
  auto c = Open();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(SeesPresent(*c, 3, absl::Seconds(10)));
  for (const auto& m : c->Members()) {
    EXPECT_TRUE(m.healthy) << m.entry.id() << ": " << m.error;
    EXPECT_GT(m.lease_ttl_s, 0) << m.entry.id();
    ASSERT_EQ(m.entry.volumes_size(), 1);
    EXPECT_EQ(m.entry.volumes(0).size(), 160 * kMiB);
    EXPECT_FALSE(m.entry.version().empty());
  }
  auto layout = c->CreateVolume("vol0", 4 * kMiB, 1, {});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->members_size(), 3);
  EXPECT_EQ(layout->size(), 3 * 160 * kMiB);
  auto again = c->CreateVolume("vol0", 4 * kMiB, 1, {});
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();

  auto buf = c->AllocateBuffer(256 * kMiB);
  ASSERT_TRUE(buf.ok()) << buf.status();
  // 1 B .. 256 MiB at unaligned offsets, each put then read back by a second client.
  auto reader = Open();
  ASSERT_NE(reader, nullptr);
  auto rbuf = reader->AllocateBuffer(256 * kMiB);
  ASSERT_TRUE(rbuf.ok()) << rbuf.status();
  const std::pair<uint64_t, uint64_t> ops[] = {
      {1, 1}, {4097, 4095}, {4 * kMiB - 3, 7}, {12 * kMiB + 5, 4 * kMiB + 3},
      {33 * kMiB + 4099, 29 * kMiB + 1}, {65 * kMiB + 1, 256 * kMiB}};
  uint64_t salt = 1;
  for (const auto& [offset, length] : ops) {
    ASSERT_TRUE(PutPattern(*c, **buf, "vol0", offset, length, salt).ok())
        << offset << " +" << length;
    absl::Status got = GetVerified(*reader, **rbuf, "vol0", offset, length, salt);
    EXPECT_TRUE(got.ok()) << got;
    ++salt;
  }
  // The 256 MiB op dominates: every member carried about a third of the bytes, by its own
  // count (daemon stats) and by the client's.
  uint64_t total = 0;
  std::map<std::string, uint64_t> by_member;
  for (int i = 0; i < 3; ++i) {
    gdrstore::ClientOptions o;
    o.daemon_address = members_[i]->address();
    auto probe = gdrstore::Client::Connect(o);
    ASSERT_TRUE(probe.ok()) << probe.status();
    auto stats = GetStats(**probe);
    ASSERT_TRUE(stats.ok()) << stats.status();
    const uint64_t b = stats->total().read_bytes() + stats->total().write_bytes();
    by_member[absl::StrCat("m", i)] = b;
    total += b;
  }
  for (const auto& [id, b] : by_member) {
    EXPECT_GT(double(b) / double(total), 0.25) << id << " carried " << b << " of " << total;
    EXPECT_LT(double(b) / double(total), 0.42) << id << " carried " << b << " of " << total;
  }
  uint64_t client_bytes = 0;
  for (const auto& m : c->Members()) client_bytes += m.bytes;
  for (const auto& m : reader->Members()) client_bytes += m.bytes;
  EXPECT_EQ(client_bytes, total);
}

TEST_F(ClusterTest, AKilledMemberLeavesWithinItsTtlItsR1StripesFailNamingItAndItRejoins) {
  auto c = Open();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(SeesPresent(*c, 3, absl::Seconds(10)));
  auto layout = c->CreateVolume("vol0", 1 * kMiB, 1, {"m0", "m1", "m2"});
  ASSERT_TRUE(layout.ok()) << layout.status();
  auto buf = c->AllocateBuffer(6 * kMiB);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(PutPattern(*c, **buf, "vol0", 0, 6 * kMiB, 7).ok());

  const absl::Time killed = absl::Now();
  ASSERT_TRUE(members_[2]->Signal(SIGKILL).ok());
  (void)members_[2]->Wait(absl::Seconds(10));
  // Gone from the view once its lease runs out (TTL plus etcd's tick), not before a TTL.
  ASSERT_TRUE(PollUntil(
      [&] {
        for (const auto& m : c->Members()) {
          if (m.entry.id() == "m2") return !m.present;
        }
        return false;
      },
      absl::Seconds(kTtlS + 10), absl::Milliseconds(100)));
  std::cerr << "m2 left the view " << absl::FormatDuration(absl::Now() - killed)
            << " after SIGKILL (ttl " << kTtlS << " s)\n";

  // Stripe 2 (bytes [2, 3) MiB) is m2's: UNAVAILABLE naming m2. Stripes 0, 1 are not.
  absl::Status on_dead = c->Get("vol0", 2 * kMiB + 10, 100, **buf);
  EXPECT_TRUE(absl::IsUnavailable(on_dead)) << on_dead;
  EXPECT_TRUE(absl::StrContains(on_dead.message(), "m2")) << on_dead;
  absl::Status spanning = c->Get("vol0", 0, 6 * kMiB, **buf);
  EXPECT_TRUE(absl::StrContains(spanning.message(), "m2")) << spanning;
  EXPECT_TRUE(GetVerified(*c, **buf, "vol0", 0, 2 * kMiB, 7).ok());
  EXPECT_TRUE(GetVerified(*c, **buf, "vol0", 3 * kMiB + 1, 2 * kMiB - 1, 7).ok());

  // Restarted on its file: it registers again and serves its stripes with the bytes it had.
  absl::Status restarted = StartMember(2);
  ASSERT_TRUE(restarted.ok()) << restarted;
  ASSERT_TRUE(SeesPresent(*c, 3, absl::Seconds(10)));
  EXPECT_TRUE(PollUntil([&] { return GetVerified(*c, **buf, "vol0", 0, 6 * kMiB, 7).ok(); },
                        absl::Seconds(10), absl::Milliseconds(200)));
}

TEST_F(ClusterTest, WithTwoReplicasGetsSurviveAKilledMemberAndNoAcknowledgedPutIsLost) {
  auto c = Open();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(SeesPresent(*c, 3, absl::Seconds(10)));
  auto layout = c->CreateVolume("vol0", 1 * kMiB, 2, {});
  ASSERT_TRUE(layout.ok()) << layout.status();
  constexpr uint64_t kChunk = 3 * kMiB + 11;  // crosses members and stripes unaligned
  constexpr int kChunks = 24;
  ASSERT_LE(kChunks * kChunk, layout->size());
  auto buf = c->AllocateBuffer(kChunk);
  ASSERT_TRUE(buf.ok());

  // Puts of chunk i (salt i) while m1 is killed half way: each acknowledged one must read back.
  std::vector<bool> acked(kChunks, false);
  std::atomic<int> next{0};
  std::thread killer([&] {
    PollUntil([&] { return next.load() >= kChunks / 2; }, absl::Seconds(60));
    (void)members_[1]->Signal(SIGKILL);
  });
  for (int i = 0; i < kChunks; ++i) {
    absl::Status st = PutPattern(*c, **buf, "vol0", i * kChunk, kChunk, 100 + i);
    acked[i] = st.ok();
    if (!st.ok()) {
      EXPECT_TRUE(absl::StrContains(st.message(), "m1")) << st;
    }
    next.store(i + 1);
  }
  killer.join();
  (void)members_[1]->Wait(absl::Seconds(10));
  int n_acked = 0;
  for (int i = 0; i < kChunks; ++i) {
    if (!acked[i]) continue;
    ++n_acked;
    absl::Status got = GetVerified(*c, **buf, "vol0", i * kChunk, kChunk, 100 + i);
    EXPECT_TRUE(got.ok()) << "chunk " << i << ": " << got;
  }
  EXPECT_GE(n_acked, kChunks / 2);
  std::cerr << n_acked << " of " << kChunks << " puts acknowledged around the kill\n";
}

TEST_F(ClusterTest, WithTwoReplicasAGetFailsOverFromAHungMemberWithinTheClientsTimeout) {
  gdrstore::ClusterOptions o;
  o.etcd_url = url();
  o.member_retry = std::chrono::milliseconds(200);
  constexpr auto kTimeout = std::chrono::seconds(4);
  o.client.rpc_timeout = kTimeout;
  auto opened = gdrstore::ClusterClient::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto& c = *opened;
  ASSERT_TRUE(SeesPresent(*c, 3, absl::Seconds(10)));
  auto layout = c->CreateVolume("vol0", 1 * kMiB, 2, {});
  ASSERT_TRUE(layout.ok()) << layout.status();
  constexpr uint64_t kLength = 6 * kMiB + 7;  // every member holds a first replica of some
  auto buf = c->AllocateBuffer(kLength);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(PutPattern(*c, **buf, "vol0", 0, kLength, 7).ok());

  // A hung member (stopped, its sockets open): pieces whose first replica it holds must go to
  // the second within the op's timeout, not wait for the member to come back.
  ASSERT_TRUE(members_[1]->Stop().ok());
  absl::Cleanup resume = [&] { (void)members_[1]->Signal(SIGCONT); };
  std::atomic<bool> finished{false};
  // Bounds the test if the get never ends: the member resumes after 30 s.
  std::thread watchdog([&] {
    if (!PollUntil([&] { return finished.load(); }, absl::Seconds(30))) {
      (void)members_[1]->Signal(SIGCONT);
    }
  });
  const absl::Time t0 = absl::Now();
  absl::Status got = GetVerified(*c, **buf, "vol0", 0, kLength, 7);
  const absl::Duration took = absl::Now() - t0;
  finished.store(true);
  watchdog.join();
  EXPECT_TRUE(got.ok()) << got;
  // The deadline is the contract: failover happens inside it (slack for a loaded machine).
  EXPECT_LE(took, absl::FromChrono(kTimeout) + absl::Seconds(1)) << "the get took " << took;
  std::cerr << "get with a hung member took " << took << "\n";
}

TEST_F(ClusterTest, DaemonsServeThroughAnEtcdOutageAndRegisterAgain) {
  auto c = Open();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(SeesPresent(*c, 3, absl::Seconds(10)));
  ASSERT_TRUE(c->CreateVolume("vol0", 1 * kMiB, 1, {}).ok());
  auto buf = c->AllocateBuffer(8 * kMiB);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE(PutPattern(*c, **buf, "vol0", 5, 8 * kMiB, 3).ok());

  ASSERT_TRUE(etcd_->Stop().ok());
  // Longer than a TTL without etcd: the daemons keep serving and the client its last view.
  absl::SleepFor(absl::Seconds(kTtlS + 1));
  for (auto& m : members_) EXPECT_TRUE(m->Running());
  EXPECT_TRUE(GetVerified(*c, **buf, "vol0", 5, 8 * kMiB, 3).ok());
  EXPECT_TRUE(absl::StrContains(members_[0]->Stderr(), "serving on"))
      << members_[0]->Stderr();

  ASSERT_TRUE(etcd_->Start().ok());
  ASSERT_TRUE(SeesPresent(*c, 3, absl::Seconds(15)));
  // A lease lost while etcd was away (revoked here) is noticed and the member registers anew.
  etcd::EtcdClient::Options eo;
  eo.endpoints = {etcd_->endpoint()};
  auto ec = etcd::EtcdClient::Create(eo);
  ASSERT_TRUE(ec.ok());
  auto entry = (*ec)->Get("/gdr-test/members/m0");
  ASSERT_TRUE(entry.ok() && entry->has_value()) << entry.status();
  ASSERT_TRUE((*ec)->RevokeLease((*entry)->lease).ok());
  EXPECT_TRUE(PollUntil(
      [&] {
        auto e = (*ec)->Get("/gdr-test/members/m0");
        return e.ok() && e->has_value() && (*e)->lease != (*entry)->lease;
      },
      absl::Seconds(kTtlS + 10), absl::Milliseconds(100)))
      << members_[0]->Stderr();
  EXPECT_TRUE(GetVerified(*c, **buf, "vol0", 5, 8 * kMiB, 3).ok());
}

TEST_F(ClusterTest, BadInputIsRefusedNamingWhatIsWrong) {
  // A URL that does not parse: the daemon exits 2 naming the flag.
  auto bad = RunProcess({GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--cluster",
                         "etcd//127.0.0.1:2379/p"},
                        dir_->path(), "bad-url", absl::Seconds(30));
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_NE(bad->exit_code, 0);
  EXPECT_TRUE(absl::StrContains(bad->err, "--cluster")) << bad->Describe();

  // etcd unreachable at start: the daemon serves and says it will try again.
  auto nobody = BoundPort::Reserve();
  ASSERT_TRUE(nobody.ok());
  auto lonely = DaemonProcess::Start(
      {"--cluster", absl::StrCat("etcd://", nobody->address(), "/p"), "--cluster-id", "x"});
  ASSERT_TRUE(lonely.ok()) << lonely.status();
  EXPECT_TRUE(PollUntil(
      [&] { return absl::StrContains((*lonely)->Stderr(), "trying again"); },
      absl::Seconds(10)))
      << (*lonely)->Stderr();
  EXPECT_TRUE(HealthCheck((*lonely)->address(), absl::Seconds(5)).value_or(false));

  // A malformed layout entry: refused with its key named.
  etcd::EtcdClient::Options eo;
  eo.endpoints = {etcd_->endpoint()};
  auto ec = etcd::EtcdClient::Create(eo);
  ASSERT_TRUE(ec.ok());
  ASSERT_TRUE((*ec)->Put("/gdr-test/volumes/broken", R"({"name":"broken","stripe_unit":"3"})").ok());
  auto c = Open();
  ASSERT_NE(c, nullptr);
  auto l = c->Layout("broken");
  EXPECT_TRUE(absl::IsInvalidArgument(l.status())) << l.status();
  EXPECT_TRUE(absl::StrContains(l.status().message(), "/gdr-test/volumes/broken")) << l.status();
  auto buf = c->AllocateBuffer(4096);
  ASSERT_TRUE(buf.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(c->Get("broken", 0, 10, **buf)));
  EXPECT_TRUE(absl::IsNotFound(c->Get("nosuch", 0, 10, **buf)));

  gdrstore::ClusterOptions o;
  o.etcd_url = "http://127.0.0.1:2379/p";
  EXPECT_TRUE(absl::IsInvalidArgument(gdrstore::ClusterClient::Open(o).status()));
  o.etcd_url = absl::StrCat("etcd://", nobody->address(), "/p");
  auto away = gdrstore::ClusterClient::Open(o);
  EXPECT_FALSE(away.ok());
  EXPECT_TRUE(absl::StrContains(away.status().message(), nobody->address())) << away.status();
}

// The volumes `id`'s entry in etcd lists now (name -> size); an error when the key is absent or
// its value does not parse.
absl::StatusOr<std::map<std::string, uint64_t>> EntryVolumes(etcd::EtcdClient& etcd,
                                                             const std::string& key,
                                                             int64_t* lease = nullptr) {
  auto kv = etcd.Get(key);
  if (!kv.ok()) return kv.status();
  if (!kv->has_value()) return absl::NotFoundError(absl::StrCat(key, " is absent"));
  gdrstore::v1::ClusterMember entry;
  auto parsed = google::protobuf::util::JsonStringToMessage((*kv)->value, &entry);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": ", std::string(parsed.message())));
  }
  if (lease != nullptr) *lease = (*kv)->lease;
  std::map<std::string, uint64_t> out;
  for (const auto& v : entry.volumes()) out[v.name()] = v.size();
  return out;
}

// Whether `c` sees member `id` present with (or without) `volume` in its entry.
bool SeesVolume(gdrstore::ClusterClient& c, const std::string& id, const std::string& volume,
                bool listed) {
  for (const auto& m : c.Members()) {
    if (m.entry.id() != id || !m.present) continue;
    bool found = false;
    for (const auto& v : m.entry.volumes()) found |= v.name() == volume;
    return found == listed;
  }
  return false;
}

TEST(ClusterRunTimeVolumeTest, AVolumeMadeAtRunTimeJoinsTheMemberEntryAndLeavesItWhenDeleted) {
  if (absl::Status st = EtcdServer::Available(); !st.ok()) GTEST_SKIP() << st.message();
  auto etcd = EtcdServer::Create();
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  auto dir = TempDir::Create("cluster-run-time");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string url = (*etcd)->url("gdr-rt");
  const std::string key = "/gdr-rt/members/m0";
  auto d = DaemonProcess::Start({"--cluster", url, "--cluster-id", "m0", "--volume-dir",
                                 (*dir)->path() + ",writable"});
  ASSERT_TRUE(d.ok()) << d.status();
  etcd::EtcdClient::Options eo;
  eo.endpoints = {(*etcd)->endpoint()};
  auto ec = etcd::EtcdClient::Create(eo);
  ASSERT_TRUE(ec.ok()) << ec.status();
  int64_t lease = 0;
  ASSERT_TRUE(PollUntil([&] { return EntryVolumes(**ec, key, &lease).ok(); }, absl::Seconds(10)))
      << (*d)->Stderr();
  EXPECT_TRUE(EntryVolumes(**ec, key)->empty());

  gdrstore::ClientOptions co;
  co.daemon_address = (*d)->address();
  auto admin = gdrstore::Client::Connect(co);
  ASSERT_TRUE(admin.ok()) << admin.status();
  const std::string name = "run-time.bin";  // a cluster volume name: no slash
  auto made = (*admin)->CreateVolume(name, 4 * kMiB, /*file=*/true);
  ASSERT_TRUE(made.ok()) << made.status();

  // (1) The entry lists it with its size, re-put on the same lease (the member stays).
  std::map<std::string, uint64_t> listed;
  EXPECT_TRUE(PollUntil(
      [&] {
        auto v = EntryVolumes(**ec, key);
        if (v.ok()) listed = *v;
        return listed.count(name) > 0;
      },
      absl::Seconds(10)))
      << (*d)->Stderr();
  EXPECT_EQ(listed[name], 4 * kMiB);
  int64_t lease_now = 0;
  ASSERT_TRUE(EntryVolumes(**ec, key, &lease_now).ok());
  EXPECT_EQ(lease_now, lease);

  // (2) A client following the prefix sees it (the watch delivers the re-put), lays a cluster
  // volume over it and moves verified bytes.
  gdrstore::ClusterOptions o;
  o.etcd_url = url;
  auto c = gdrstore::ClusterClient::Open(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(PollUntil([&] { return SeesVolume(**c, "m0", name, true); }, absl::Seconds(10)));
  auto layout = (*c)->CreateVolume(name, kMiB, 1, {"m0"});
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->size(), 4 * kMiB);
  auto buf = (*c)->AllocateBuffer(4 * kMiB);
  ASSERT_TRUE(buf.ok()) << buf.status();
  ASSERT_TRUE(PutPattern(**c, **buf, name, 3, 4 * kMiB - 3, 5).ok());
  absl::Status got = GetVerified(**c, **buf, name, 3, 4 * kMiB - 3, 5);
  EXPECT_TRUE(got.ok()) << got;

  // (3) Deleted at run time: gone from the entry and from the client's view, and an op on the
  // layout still naming it is answered NOT_FOUND by the member.
  ASSERT_TRUE((*admin)->DeleteVolume(name, /*delete_file=*/true).ok());
  EXPECT_TRUE(PollUntil(
      [&] {
        auto v = EntryVolumes(**ec, key);
        return v.ok() && v->count(name) == 0;
      },
      absl::Seconds(10)))
      << (*d)->Stderr();
  EXPECT_TRUE(PollUntil([&] { return SeesVolume(**c, "m0", name, false); }, absl::Seconds(10)));
  absl::Status gone = (*c)->Get(name, 0, 4096, **buf);
  EXPECT_TRUE(absl::IsNotFound(gone)) << gone;
  EXPECT_TRUE(absl::StrContains(gone.message(), name)) << gone;

  // Made while etcd is away: the entry written once etcd answers lists it.
  ASSERT_TRUE((*etcd)->Stop().ok());
  ASSERT_TRUE((*admin)->CreateVolume("later", kMiB).ok());
  ASSERT_TRUE((*etcd)->Start().ok());
  EXPECT_TRUE(PollUntil(
      [&] {
        auto v = EntryVolumes(**ec, key);
        return v.ok() && v->count("later") > 0 && v->at("later") == kMiB;
      },
      absl::Seconds(15)))
      << (*d)->Stderr();

  // A clean stop still takes the entry away, and the daemon (sanitized or not) exits 0.
  c->reset();  // its streams would hold the drain up
  admin->reset();
  auto stopped = (*d)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(DescribeWaitStatus(*stopped), "exited 0") << (*d)->Stderr();
  auto after = (*ec)->Get(key);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(after->has_value()) << (*after)->value;
}

}  // namespace
}  // namespace gdr::integ
