// The tcp link pool against a real gdrstored with fewer links than clients: every client is
// served (in turns, never refused), the counters show the handovers, and a client that stops
// answering mid-transfer cannot hold a link the others wait for.
#include <signal.h>

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"
#include "tests/integration/verified_ops.h"

namespace gdr::integ {
namespace {

namespace v1 = gdrstore::v1;
constexpr uint64_t kMiB = 1 << 20;

absl::StatusOr<v1::TransportStats> Tcp(gdrstore::Client& c) {
  absl::StatusOr<v1::GetStatsResponse> resp = GetStats(c);
  if (!resp.ok()) return resp.status();
  for (const auto& t : resp->transports())
    if (t.transport() == v1::TRANSPORT_TCP) return t;
  return absl::NotFoundError("GetStats has no tcp transport");
}

// Verified ops, both directions, on [base, base + span) of "vol0" from a client of its own (so
// a tcp target, hence a pool destination, of its own).
absl::Status VerifiedClient(const std::string& address, int index, uint64_t base, uint64_t span,
                            uint64_t volume_size) {
  gdrstore::ClientOptions o;
  o.daemon_address = address;
  auto client = gdrstore::Client::Connect(o);
  if (!client.ok()) return client.status();
  constexpr uint64_t kMaxLen = 512 << 10;
  auto buf = (*client)->AllocateBuffer(kMaxLen + 2 * kGuardBytes + 4096);
  if (!buf.ok()) return buf.status();
  SaltMap salts(volume_size);
  std::mt19937_64 rng(7000 + index);
  for (int i = 0; i < 40; ++i) {
    const uint64_t len = 1 + rng() % kMaxLen;
    const gdrstore::Extent e{"vol0", base + rng() % (span - len + 1), len};
    const size_t boff = kGuardBytes + rng() % 4096;
    absl::Status s = i % 2 == 0 ? VerifiedRead(**client, **buf, boff, kGuardBytes, e,
                                               1 + index * 1000 + i, &salts)
                                : VerifiedWrite(**client, **buf, boff, e, salts);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("client ", index, " op ", i, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

TEST(LinkPoolTest, EightClientsOnTwoLinksAreAllServedInTurns) {
  constexpr int kClients = 8;
  constexpr uint64_t kSpan = 8 * kMiB;
  auto d = DaemonProcess::Start({"--volume", absl::StrCat("vol0=", kClients * kSpan),
                                 "--tcp-max-links", "2", "--tcp-link-turn-ms", "5"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string addr = (*d)->address();
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(kClients);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back(
        [&, c] { results[c] = VerifiedClient(addr, c, c * kSpan, kSpan, kClients * kSpan); });
  }
  for (auto& t : threads) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_TRUE(results[c].ok()) << results[c];

  gdrstore::ClientOptions o;
  o.daemon_address = addr;
  auto client = gdrstore::Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<v1::TransportStats> tcp = Tcp(**client);
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  // Not one op failed (links of clients that went away count as pool errors, ops do not).
  EXPECT_EQ(tcp->ops().errors_size(), 0) << tcp->DebugString();
  EXPECT_EQ(tcp->ops().write_ops() + tcp->ops().read_ops(), uint64_t{kClients} * 60);  // a verified Read is a Read and a Write
  const v1::PoolStats* pool = &tcp->pool();
  EXPECT_EQ(pool->capacity(), 2u);
  EXPECT_LE(pool->in_use(), 2u);
  EXPECT_GE(pool->handovers(), 1u) << pool->DebugString();
  EXPECT_EQ(pool->waiting_ops(), 0u);
  auto st = (*d)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << (*d)->Stderr();
}

// One link. A gdrctl bench of large Writes holds it and is then stopped (SIGSTOP): its target
// reads nothing more, so its chunks never complete. Another client's verified ops must still
// succeed: the stopped client's turn ends, and after the handover timeout its ops are failed
// and the link handed over.
TEST(LinkPoolTest, AStoppedClientCannotHoldTheOnlyLink) {
  constexpr uint64_t kVolume = 256 * kMiB;
  auto d = DaemonProcess::Start({"--volume", absl::StrCat("vol0=", kVolume), "--tcp-max-links",
                                 "1", "--tcp-link-turn-ms", "5", "--tcp-handover-timeout-ms",
                                 "500"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string addr = (*d)->address();
  auto dir = TempDir::Create("link-pool");
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto hog = ChildProcess::Spawn({GDR_GDRCTL_BIN, "--daemon", addr, "bench", "-t", "write", "-s",
                                  "32MiB", "-n", "100000", "--qd", "2", "--span", "128MiB", "-q"},
                                 (*dir)->File("hog.out"), (*dir)->File("hog.err"));
  ASSERT_TRUE(hog.ok()) << hog.status();

  gdrstore::ClientOptions o;
  o.daemon_address = addr;
  auto client = gdrstore::Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  // Stop the hog while it has ops in flight on the link.
  ASSERT_TRUE(PollUntil(
      [&] {
        absl::StatusOr<v1::TransportStats> t = Tcp(**client);
        return t.ok() && t->pool().inflight_ops() > 0;
      },
      absl::Seconds(30), absl::Milliseconds(2)))
      << ReadFileOrEmpty((*hog)->stderr_path());
  ASSERT_TRUE((*hog)->Signal(SIGSTOP).ok());

  absl::Status s = VerifiedClient(addr, 1, 128 * kMiB, 128 * kMiB, kVolume);
  EXPECT_TRUE(s.ok()) << s;
  absl::StatusOr<v1::TransportStats> tcp = Tcp(**client);
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_GE(tcp->pool().handovers(), 1u) << tcp->DebugString();

  ASSERT_TRUE((*hog)->Signal(SIGKILL).ok());
  (void)(*hog)->Signal(SIGCONT);
  ASSERT_TRUE((*hog)->Wait(absl::Seconds(30)).ok());
  auto st = (*d)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << (*d)->Stderr();
}

// A lone client with bulk ops in flight gets more links than its share (--tcp-links-per-target,
// 2 by default): here the whole pool of 16 (--tcp-max-links-per-target defaults to it). A second
// client then gets links of the first's past its share, at once (no turn), and its verified
// ops succeed while the first goes on, no op of either failing.
TEST(LinkPoolTest, ALoneClientGetsLinksPastItsShareAndGivesThemBackToASecond) {
  constexpr uint64_t kVolume = 512 * kMiB;
  auto d = DaemonProcess::Start({"--volume", absl::StrCat("vol0=", kVolume), "--tcp-max-links",
                                 "16", "--tcp-link-turn-ms", "60000"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string addr = (*d)->address();
  auto dir = TempDir::Create("link-pool");
  ASSERT_TRUE(dir.ok()) << dir.status();
  auto bulk = ChildProcess::Spawn({GDR_GDRCTL_BIN, "--daemon", addr, "bench", "-t", "write", "-s",
                                   "32MiB", "-n", "100000", "--qd", "2", "--span", "256MiB",
                                   "-q"},
                                  (*dir)->File("bulk.out"), (*dir)->File("bulk.err"));
  ASSERT_TRUE(bulk.ok()) << bulk.status();

  gdrstore::ClientOptions o;
  o.daemon_address = addr;
  auto observer = gdrstore::Client::Connect(o);
  ASSERT_TRUE(observer.ok()) << observer.status();
  v1::PoolStats alone;
  ASSERT_TRUE(PollUntil(
      [&] {
        absl::StatusOr<v1::TransportStats> t = Tcp(**observer);
        if (t.ok()) alone = t->pool();
        return t.ok() && t->pool().in_use() == 16;
      },
      absl::Seconds(60), absl::Milliseconds(2)))
      << alone.DebugString() << ReadFileOrEmpty((*bulk)->stderr_path());
  EXPECT_EQ(alone.destinations(), 1u);
  EXPECT_EQ(alone.handovers(), 0u);

  // The turn is a minute: only links past the first client's share can move.
  absl::Status s = VerifiedClient(addr, 1, 256 * kMiB, 256 * kMiB, kVolume);
  EXPECT_TRUE(s.ok()) << s;
  absl::StatusOr<v1::TransportStats> tcp = Tcp(**observer);
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_GE(tcp->pool().handovers(), 1u) << tcp->DebugString();
  EXPECT_LE(tcp->pool().in_use(), 16u);
  EXPECT_EQ(tcp->ops().errors_size(), 0) << tcp->DebugString();
  // The first client is still moving bytes.
  const uint64_t written = tcp->ops().write_bytes();
  ASSERT_TRUE(PollUntil(
      [&] {
        absl::StatusOr<v1::TransportStats> t = Tcp(**observer);
        return t.ok() && t->ops().write_bytes() > written;
      },
      absl::Seconds(60), absl::Milliseconds(2)))
      << ReadFileOrEmpty((*bulk)->stderr_path());

  ASSERT_TRUE((*bulk)->Signal(SIGKILL).ok());
  ASSERT_TRUE((*bulk)->Wait(absl::Seconds(30)).ok());
  auto st = (*d)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << (*d)->Stderr();
}

// The client counts the daemon's links to its target (TransportInfo::target.links), which
// gdr_bench sizes its raw-TCP baselines by: after a lone client's bulk Write it holds at least
// one link, and its count is the daemon's (the only destination) once both have settled.
TEST(LinkPoolTest, TheClientCountsTheLinksTheDaemonHoldsToIt) {
  constexpr uint64_t kOp = 32 * kMiB;
  auto d = DaemonProcess::Start({"--volume", absl::StrCat("vol0=", kOp)});
  ASSERT_TRUE(d.ok()) << d.status();
  gdrstore::ClientOptions o;
  o.daemon_address = (*d)->address();
  auto client = gdrstore::Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto buf = (*client)->AllocateBuffer(kOp);
  ASSERT_TRUE(buf.ok()) << buf.status();
  absl::StatusOr<gdrstore::OpResult> r = (*client)->Write({"vol0", 0, kOp}, **buf);
  ASSERT_TRUE(r.ok()) << r.status();
  uint32_t links = 0, in_use = 0;
  EXPECT_TRUE(PollUntil(
      [&] {
        links = (*client)->transport_info().target.links;
        absl::StatusOr<v1::TransportStats> t = Tcp(**client);
        if (t.ok()) in_use = t->pool().in_use();
        return t.ok() && links >= 1 && links == in_use &&
               links == (*client)->transport_info().target.links;
      },
      absl::Seconds(30), absl::Milliseconds(5)))
      << "client counts " << links << " links, the daemon " << in_use;
}

}  // namespace
}  // namespace gdr::integ
