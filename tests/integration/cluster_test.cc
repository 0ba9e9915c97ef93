// A cluster of real daemons on loopback registered in a real etcd (Debian's etcd-server):
// striped and replicated ops through ClusterClient, members killed and restarted, etcd taken
// away, volumes made and deleted at run time following into the member entry, bad input, an
// etcd that takes only mutual TLS (the C++ and C options, bad TLS files), and three members
// with the TLS flags of deploy/kubernetes/examples/etcd.yaml.
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/etcd/etcd_client.h"
#include "common/base/pattern.h"
#include "gdrstore/cluster.h"
#include "gdrstore/gdrstore.h"
#include "tests/common/etcd_server.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"
#include "tests/integration/test_pki.h"

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

absl::Status PutPattern(gdrstore::ClusterClient& c, const gdrstore::ClusterBuffer& buf,
                        const std::string& volume, uint64_t offset, uint64_t length,
                        uint64_t salt) {
  const uint64_t seed = PatternSeed(volume, salt);
  PatternFill(seed, offset, std::span(buf.data(), length));
  return c.Put(volume, offset, length, buf);
}

absl::Status GetVerified(gdrstore::ClusterClient& c, const gdrstore::ClusterBuffer& buf,
                         const std::string& volume, uint64_t offset, uint64_t length,
                         uint64_t salt) {
  std::memset(buf.data(), 0xEE, length);
  if (absl::Status st = c.Get(volume, offset, length, buf); !st.ok()) return st;
  auto bad = PatternMismatch(PatternSeed(volume, salt), offset,
                             std::span<const std::byte>(buf.data(), length));
  if (bad) {
    return absl::DataLossError(absl::StrCat("byte ", *bad, " of [", offset, ", +", length,
                                            ") differs"));
  }
  return absl::OkStatus();
}

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

// etcd's client port as examples/etcd.yaml runs it: TLS, client certificates required, and a
// daemon m0 registered through it with the CA and a certificate of its own.
class ClusterTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status st = EtcdServer::Available(); !st.ok()) GTEST_SKIP() << st.message();
    auto dir = TempDir::Create("cluster-tls");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
    TestPki pki(dir_->path());
    auto ca = pki.MakeCa("etcd");
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = *ca;
    auto server = pki.Issue(ca_, "etcd-server", TestPki::Use::kServer);
    auto member = pki.Issue(ca_, "member", TestPki::Use::kClient, "DNS:gdrstored");
    ASSERT_TRUE(server.ok() && member.ok()) << server.status() << member.status();
    member_ = *member;
    auto client_port = BoundPort::Reserve();
    auto peer_port = BoundPort::Reserve();
    ASSERT_TRUE(client_port.ok() && peer_port.ok());
    endpoint_ = client_port->address();
    const std::string peer = absl::StrCat("http://", peer_port->address());
    client_port->Release();
    peer_port->Release();
    std::vector<std::string> argv = {EtcdServer::kBinary, "--name=tls",
                                     "--data-dir=" + dir_->File("data"),
                                     "--listen-client-urls=https://" + endpoint_,
                                     "--advertise-client-urls=https://" + endpoint_,
                                     "--listen-peer-urls=" + peer,
                                     "--initial-advertise-peer-urls=" + peer,
                                     "--initial-cluster=tls=" + peer,
                                     "--cert-file=" + server->cert, "--key-file=" + server->key,
                                     "--trusted-ca-file=" + ca_.cert, "--client-cert-auth"};
    auto etcd = ChildProcess::Spawn(argv, dir_->File("etcd.out"), dir_->File("etcd.err"));
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = std::move(*etcd);
    url_ = absl::StrCat("etcd://", endpoint_, "/gdr-tls");
    auto d = DaemonProcess::Start({"--cluster", url_, "--cluster-id", "m0", "--cluster-ttl", "3",
                                   "--cluster-tls-ca", ca_.cert, "--cluster-tls-cert",
                                   member_.cert, "--cluster-tls-key", member_.key, "--volume",
                                   "vol0=4MiB"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }

  // The client's options: the etcd URL, its CA and the member's certificate.
  gdrstore::ClusterOptions Tls() const {
    gdrstore::ClusterOptions o;
    o.etcd_url = url_;
    o.etcd_tls_ca = ca_.cert;
    o.etcd_tls_cert = member_.cert;
    o.etcd_tls_key = member_.key;
    return o;
  }

  // Whether `open` opens a client seeing m0 present, tried until it does (etcd and the
  // daemon's registration come up in their own time); `last` says why not.
  static bool SeesM0(const std::function<absl::Status(bool* seen)>& open, absl::Status* last) {
    return PollUntil(
        [&] {
          bool seen = false;
          *last = open(&seen);
          return last->ok() && seen;
        },
        absl::Seconds(20), absl::Milliseconds(200));
  }

  std::unique_ptr<TempDir> dir_;
  CertFiles ca_, member_;
  std::string endpoint_, url_;
  std::unique_ptr<ChildProcess> etcd_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(ClusterTlsTest, MembersAndClientsReachAnEtcdThatTakesOnlyMutualTls) {
  std::unique_ptr<gdrstore::ClusterClient> c;
  absl::Status last;
  bool seen = SeesM0(
      [&](bool* seen) {
        auto opened = gdrstore::ClusterClient::Open(Tls());
        if (!opened.ok()) return opened.status();
        c = std::move(*opened);
        for (const auto& m : c->Members()) *seen |= m.present && m.entry.id() == "m0";
        return absl::OkStatus();
      },
      &last);
  ASSERT_TRUE(seen) << last << "; daemon: " << daemon_->Stderr();
  // The layout goes into etcd over TLS, and ops follow it to the member.
  auto layout = c->CreateVolume("vol0", 64 * 1024, 1, {});
  ASSERT_TRUE(layout.ok()) << layout.status();
  auto buf = c->AllocateBuffer(kMiB);
  ASSERT_TRUE(buf.ok()) << buf.status();
  ASSERT_TRUE(PutPattern(*c, **buf, "vol0", 4097, kMiB - 3, 7).ok());
  absl::Status got = GetVerified(*c, **buf, "vol0", 4097, kMiB - 3, 7);
  EXPECT_TRUE(got.ok()) << got;
  // gdrctl takes the daemon's flag names; a file it cannot read is a usage error naming it.
  std::vector<std::string> argv = {GDR_GDRCTL_BIN, "--cluster", url_, "--cluster-tls-ca", ca_.cert,
                                   "--cluster-tls-cert", member_.cert, "--cluster-tls-key",
                                   member_.key, "cluster", "status"};
  auto status = RunProcess(argv, dir_->path(), "gdrctl-tls", absl::Seconds(60));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->exit_code, 0) << status->Describe() << status->out;
  EXPECT_TRUE(absl::StrContains(status->out, "m0")) << status->out;
  argv[4] = dir_->File("missing-ca.pem");
  auto missing = RunProcess(argv, dir_->path(), "gdrctl-tls-missing", absl::Seconds(60));
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_EQ(missing->exit_code, 2) << missing->Describe();
  EXPECT_TRUE(absl::StrContains(missing->err, argv[4])) << missing->Describe();

  // Without a certificate etcd closes the handshake: UNAVAILABLE naming the endpoint, as etcd
  // away is. In plaintext it is no etcd at all.
  gdrstore::ClusterOptions no_cert = Tls();
  no_cert.etcd_tls_cert.clear();
  no_cert.etcd_tls_key.clear();
  no_cert.etcd_timeout = std::chrono::milliseconds(500);
  auto refused = gdrstore::ClusterClient::Open(no_cert);
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), endpoint_)) << refused.status();
  gdrstore::ClusterOptions plain;
  plain.etcd_url = url_;
  plain.etcd_timeout = std::chrono::milliseconds(500);
  EXPECT_FALSE(gdrstore::ClusterClient::Open(plain).ok());
  // The daemon refuses half a pair before it serves.
  auto half = RunProcess({GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--cluster", url_,
                          "--cluster-tls-cert", member_.cert},
                         dir_->path(), "half-tls", absl::Seconds(30));
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_NE(half->exit_code, 0);
  EXPECT_TRUE(absl::StrContains(half->err, "--cluster-tls-key go together")) << half->Describe();
}

// The C ABI's etcd_tls_* fields: the same cluster through gdrstore_cluster_open, a put and a
// get through the handle.
TEST_F(ClusterTlsTest, TheCAbiTakesEtcdTls) {
  gdrstore_cluster* c = nullptr;
  absl::Cleanup close = [&] { gdrstore_cluster_close(c); };
  absl::Status last;
  bool seen = SeesM0(
      [&](bool* seen) {
        gdrstore_cluster_options o;
        gdrstore_cluster_options_init(&o);
        o.etcd_url = url_.c_str();
        o.etcd_tls_ca = ca_.cert.c_str();
        o.etcd_tls_cert = member_.cert.c_str();
        o.etcd_tls_key = member_.key.c_str();
        gdrstore_cluster_close(c);
        c = nullptr;
        char error[512] = "";
        const gdrstore_status st = gdrstore_cluster_open(&o, &c, error, sizeof(error));
        if (st != GDRSTORE_OK) return absl::Status(static_cast<absl::StatusCode>(st), error);
        char* json = nullptr;
        if (gdrstore_cluster_status_json(c, &json) != GDRSTORE_OK) {
          return absl::InternalError(gdrstore_error(c));
        }
        *seen = absl::StrContains(json, R"("id":"m0")") &&
                absl::StrContains(json, R"("present":true)");
        gdrstore_free(json);
        return absl::OkStatus();
      },
      &last);
  ASSERT_TRUE(seen) << last << "; daemon: " << daemon_->Stderr();
  ASSERT_EQ(gdrstore_cluster_create_volume(c, "vol0", 64 * 1024, 1, "m0", nullptr), GDRSTORE_OK)
      << gdrstore_error(c);
  gdrstore_cluster_buffer* b = nullptr;
  ASSERT_EQ(gdrstore_cluster_alloc_host(c, 8192, &b), GDRSTORE_OK) << gdrstore_error(c);
  auto* p = static_cast<unsigned char*>(gdrstore_cluster_buffer_data(b));
  for (int i = 0; i < 4096; ++i) p[i] = static_cast<unsigned char>(i * 7 + 1);
  ASSERT_EQ(gdrstore_cluster_put(c, "vol0", 65535, 4096, b, 0), GDRSTORE_OK) << gdrstore_error(c);
  ASSERT_EQ(gdrstore_cluster_get(c, "vol0", 65535, 4096, b, 4096), GDRSTORE_OK)
      << gdrstore_error(c);
  EXPECT_EQ(std::memcmp(p, p + 4096, 4096), 0);
  gdrstore_cluster_buffer_release(b);
}

// TLS files the etcd client cannot use are refused before any connection, naming the option
// and the file; the C ABI says the same.
TEST(ClusterTlsFilesTest, UnreadableOrNonPemFilesAndHalfAPairAreRefusedNamingThem) {
  auto dir = TempDir::Create("cluster-tls-files");
  ASSERT_TRUE(dir.ok()) << dir.status();
  TestPki pki((*dir)->path());
  auto ca = pki.MakeCa("files");
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto client = pki.Issue(*ca, "client", TestPki::Use::kClient, "DNS:client");
  ASSERT_TRUE(client.ok()) << client.status();
  const std::string not_pem = (*dir)->File("not.pem");
  std::ofstream(not_pem) << "no certificate here\n";
  const std::string missing = (*dir)->File("missing.pem");
  // Nothing listens: a refusal naming a file came before any connection.
  auto nobody = BoundPort::Reserve();
  ASSERT_TRUE(nobody.ok());
  const std::string url = absl::StrCat("etcd://", nobody->address(), "/p");
  struct Case {
    std::string ca, cert, key, named;
  };
  const Case cases[] = {
      {missing, "", "", "etcd_tls_ca"},
      {not_pem, "", "", "etcd_tls_ca"},
      {ca->cert, missing, client->key, "etcd_tls_cert"},
      {ca->cert, not_pem, client->key, "etcd_tls_cert"},
      {ca->cert, client->cert, not_pem, "etcd_tls_key"},
      {ca->cert, client->cert, ca->key, "etcd_tls_key"},  // not the certificate's key
      {ca->cert, client->cert, "", "etcd_tls_key"},
      {ca->cert, "", client->key, "etcd_tls_cert"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(absl::StrCat("ca=", k.ca, " cert=", k.cert, " key=", k.key));
    gdrstore::ClusterOptions o;
    o.etcd_url = url;
    o.etcd_tls_ca = k.ca;
    o.etcd_tls_cert = k.cert;
    o.etcd_tls_key = k.key;
    auto c = gdrstore::ClusterClient::Open(o);
    EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
    EXPECT_TRUE(absl::StrContains(c.status().message(), k.named)) << c.status();
    EXPECT_FALSE(absl::StrContains(c.status().message(), nobody->address())) << c.status();
    for (const std::string& file : {k.ca, k.cert, k.key}) {
      if (file == missing || file == not_pem) {
        EXPECT_TRUE(absl::StrContains(c.status().message(), file)) << c.status();
      }
    }

    gdrstore_cluster_options co;
    gdrstore_cluster_options_init(&co);
    co.etcd_url = url.c_str();
    co.etcd_tls_ca = k.ca.empty() ? nullptr : k.ca.c_str();
    co.etcd_tls_cert = k.cert.empty() ? nullptr : k.cert.c_str();
    co.etcd_tls_key = k.key.empty() ? nullptr : k.key.c_str();
    gdrstore_cluster* handle = nullptr;
    char error[512] = "";
    EXPECT_EQ(gdrstore_cluster_open(&co, &handle, error, sizeof(error)),
              GDRSTORE_INVALID_ARGUMENT)
        << error;
    EXPECT_EQ(handle, nullptr);
    EXPECT_TRUE(absl::StrContains(error, k.named)) << error;
  }
  // etcd TLS with a members file: there is no etcd to take it.
  gdrstore::ClusterOptions file;
  file.members_file = (*dir)->File("members.json");
  file.etcd_tls_ca = ca->cert;
  auto c = gdrstore::ClusterClient::Open(file);
  EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "etcd_tls")) << c.status();
}

// A caller built against the header before etcd_tls_*: its struct_size ends at etcd_timeout_ms,
// and whatever lies past it is never read (here pointers to a file that does not exist, which
// would be refused if they were).
TEST(ClusterTlsFilesTest, AnOptionsStructOfTheLayoutBeforeEtcdTlsStillOpens) {
  if (absl::Status st = EtcdServer::Available(); !st.ok()) GTEST_SKIP() << st.message();
  auto etcd = EtcdServer::Create();
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const std::string url = (*etcd)->url("gdr-old");
  gdrstore_cluster_options o;
  gdrstore_cluster_options_init(&o);
  o.struct_size = offsetof(gdrstore_cluster_options, etcd_timeout_ms) + sizeof(uint32_t);
  o.etcd_url = url.c_str();
  o.etcd_tls_ca = o.etcd_tls_cert = o.etcd_tls_key = "/nonexistent/etcd-tls.pem";
  gdrstore_cluster* c = nullptr;
  char error[512] = "";
  ASSERT_EQ(gdrstore_cluster_open(&o, &c, error, sizeof(error)), GDRSTORE_OK) << error;
  gdrstore_cluster_close(c);
  // The whole struct reads them.
  o.struct_size = sizeof(o);
  EXPECT_EQ(gdrstore_cluster_open(&o, &c, error, sizeof(error)), GDRSTORE_INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(error, "/nonexistent/etcd-tls.pem")) << error;
}

// deploy/kubernetes/examples/etcd.yaml's etcd, as three members on loopback: its TLS flags read
// from the example (the Secret's files swapped for the test's, the URLs' schemes its own), so
// peers and clients both show certificates of one CA. A daemon registers through the three
// with a client certificate, and a cluster client reading through each member alone sees it:
// each member serves, and what one was told reached the others over peer TLS.
TEST(EtcdExampleTest, ThreeMembersWithTheExamplesTlsFlagsServeDaemonsAndClients) {
  if (absl::Status st = EtcdServer::Available(); !st.ok()) GTEST_SKIP() << st.message();
  std::ifstream in(GDR_SOURCE_DIR "/deploy/kubernetes/examples/etcd.yaml");
  ASSERT_TRUE(in) << "cannot read examples/etcd.yaml";
  auto dir = TempDir::Create("etcd-example");
  ASSERT_TRUE(dir.ok()) << dir.status();
  TestPki pki((*dir)->path());
  auto ca = pki.MakeCa("etcd-example");
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto peer = pki.Issue(*ca, "etcd-peer", TestPki::Use::kPeer);
  auto client = pki.Issue(*ca, "gdrstore", TestPki::Use::kClient, "DNS:gdrstore");
  ASSERT_TRUE(peer.ok() && client.ok()) << peer.status() << client.status();
  // The Secret etcd-tls's keys, mounted at /etc/etcd/tls in the example.
  const std::vector<std::pair<std::string, std::string>> secret = {
      {"/etc/etcd/tls/ca.crt", ca->cert},
      {"/etc/etcd/tls/tls.crt", peer->cert},
      {"/etc/etcd/tls/tls.key", peer->key}};
  std::vector<std::string> tls_flags;
  std::set<std::string> names;
  std::string client_scheme, peer_scheme;
  for (std::string line; std::getline(in, line);) {
    absl::string_view flag = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&flag, "- --")) continue;
    const std::string f = absl::StrCat("--", flag);
    const std::string name = f.substr(0, f.find('='));
    const std::string value = f.find('=') == std::string::npos ? "" : f.substr(f.find('=') + 1);
    if (name == "--listen-client-urls") client_scheme = value.substr(0, value.find("://"));
    if (name == "--listen-peer-urls") peer_scheme = value.substr(0, value.find("://"));
    if (absl::StrContains(value, "/etc/etcd/tls/") || absl::EndsWith(name, "client-cert-auth")) {
      tls_flags.push_back(absl::StrReplaceAll(f, secret));
      names.insert(name);
    }
  }
  // TLS both ways: what the example must keep saying for this test to mean anything.
  EXPECT_EQ(client_scheme, "https");
  EXPECT_EQ(peer_scheme, "https");
  const std::set<std::string> both_ways = {
      "--client-cert-auth",      "--trusted-ca-file",      "--cert-file",      "--key-file",
      "--peer-client-cert-auth", "--peer-trusted-ca-file", "--peer-cert-file", "--peer-key-file"};
  EXPECT_EQ(names, both_ways);
  for (const std::string& f : tls_flags) {
    EXPECT_FALSE(absl::StrContains(f, "/etc/etcd/")) << f << ": a file the Secret does not hold";
  }

  std::vector<BoundPort> ports;
  for (int i = 0; i < 6; ++i) {
    auto p = BoundPort::Reserve();
    ASSERT_TRUE(p.ok()) << p.status();
    ports.push_back(std::move(*p));
  }
  std::vector<std::string> endpoints, peers, initial;
  for (int i = 0; i < 3; ++i) {
    endpoints.push_back(ports[2 * i].address());
    peers.push_back(absl::StrCat(peer_scheme, "://", ports[2 * i + 1].address()));
    initial.push_back(absl::StrCat("e", i, "=", peers.back()));
  }
  for (BoundPort& p : ports) p.Release();
  std::vector<std::unique_ptr<ChildProcess>> members;
  for (int i = 0; i < 3; ++i) {
    const std::string name = absl::StrCat("e", i);
    const std::string url = absl::StrCat(client_scheme, "://", endpoints[i]);
    std::vector<std::string> argv = {EtcdServer::kBinary,
                                     "--name=" + name,
                                     "--data-dir=" + (*dir)->File(name),
                                     "--listen-client-urls=" + url,
                                     "--advertise-client-urls=" + url,
                                     "--listen-peer-urls=" + peers[i],
                                     "--initial-advertise-peer-urls=" + peers[i],
                                     "--initial-cluster=" + absl::StrJoin(initial, ","),
                                     "--initial-cluster-state=new",
                                     "--initial-cluster-token=gdrstore-etcd"};
    argv.insert(argv.end(), tls_flags.begin(), tls_flags.end());
    auto e = ChildProcess::Spawn(argv, (*dir)->File(name + ".out"), (*dir)->File(name + ".err"));
    ASSERT_TRUE(e.ok()) << e.status();
    members.push_back(std::move(*e));
  }
  auto logs = [&] {
    std::string all;
    for (int i = 0; i < 3; ++i) {
      std::ifstream err((*dir)->File(absl::StrCat("e", i, ".err")));
      std::stringstream text;
      text << err.rdbuf();
      absl::StrAppend(&all, "\n---- e", i, " ----\n", text.str());
    }
    return all;
  };

  const std::string url = absl::StrCat("etcd://", absl::StrJoin(endpoints, ","), "/gdr-example");
  auto d = DaemonProcess::Start({"--cluster", url, "--cluster-id", "m0", "--cluster-tls-ca",
                                 ca->cert, "--cluster-tls-cert", client->cert,
                                 "--cluster-tls-key", client->key, "--volume", "vol0=4MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  for (const std::string& endpoint : endpoints) {
    gdrstore::ClusterOptions o;
    o.etcd_url = absl::StrCat("etcd://", endpoint, "/gdr-example");
    o.etcd_tls_ca = ca->cert;
    o.etcd_tls_cert = client->cert;
    o.etcd_tls_key = client->key;
    absl::Status last;
    const bool seen = PollUntil(
        [&] {
          auto c = gdrstore::ClusterClient::Open(o);
          last = c.status();
          if (!c.ok()) return false;
          for (const auto& m : (*c)->Members()) {
            if (m.present && m.entry.id() == "m0") return true;
          }
          return false;
        },
        absl::Seconds(30), absl::Milliseconds(200));
    EXPECT_TRUE(seen) << endpoint << ": " << last << "\ndaemon: " << (*d)->Stderr() << logs();
  }
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
