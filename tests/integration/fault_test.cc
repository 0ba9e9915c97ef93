// Fault injection end to end against a real gdrstored: rules from --fault and from the Admin
// service (gdrctl fault too), each kind that can run here (error, stall, corrupt, drop-link on
// tcp; qp-error and rail-down run in the SoftRoCE guest's suites), seeded reproducibility across
// restarts, counts in GetStats and ListFaults, the log, the admin right, hostile requests, and
// the configuration's rules following SIGHUP.
#include <sys/stat.h>

#include <csignal>
#include <fstream>
#include <functional>
#include <thread>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "tests/integration/admin_rpc.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/stats_rpc.h"

namespace gdr::integ {
namespace {

namespace v1 = gdrstore::v1;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = kKiB * kKiB;
constexpr char kAdminToken[] = "fault-test-admin-token-0123456789";
constexpr char kUserToken[] = "fault-test-user-token-0123456789ab";


v1::FaultSpec Spec(v1::FaultKind kind, const std::string& volume = "vol0") {
  v1::FaultSpec s;
  s.set_kind(kind);
  s.set_volume(volume);
  return s;
}

uint64_t Hits(const v1::GetStatsResponse& stats, const std::string& kind) {
  uint64_t n = 0;
  for (const v1::FaultStats& f : stats.faults()) {
    if (f.kind() == kind) n += f.hits();
  }
  return n;
}

// Sequential 4 KiB gets: which ones failed (true) and with what; the successful ones verified.
std::vector<bool> FailurePattern(DaemonProcess& d, int n, std::vector<absl::Status>* failures) {
  auto c = ConnectClient(d);
  auto buf = c->AllocateBuffer(4 * kKiB);
  EXPECT_TRUE(buf.ok());
  std::vector<bool> failed;
  std::vector<std::byte> want(4 * kKiB);
  for (int i = 0; i < n; ++i) {
    const uint64_t off = (i % 64) * 4 * kKiB;
    auto r = c->Write({"vol0", off, 4 * kKiB}, **buf);
    failed.push_back(!r.ok());
    if (!r.ok()) {
      failures->push_back(r.status());
      continue;
    }
    PatternFill(PatternSeed("vol0"), off, want);
    EXPECT_EQ(std::memcmp((*buf)->data(), want.data(), want.size()), 0) << i;
  }
  return failed;
}

TEST(FaultTest, AnErrorRateIsSeededCountedLoggedAndTheSameAfterARestart) {
  const std::vector<std::string> args = {"--volume", "vol0=4MiB", "--fault-seed", "5", "--fault",
                                         "kind=error,volume=vol0,rate=0.25,code=UNAVAILABLE"};
  std::vector<bool> first;
  for (int run = 0; run < 2; ++run) {
    auto d = DaemonProcess::Start(args);
    ASSERT_TRUE(d.ok()) << d.status();
    std::vector<absl::Status> failures;
    const std::vector<bool> failed = FailurePattern(**d, 400, &failures);
    // 400 ops at 0.25: 100 expected, sigma 8.7; 4 sigma either way.
    EXPECT_NEAR(static_cast<double>(failures.size()), 100.0, 35.0);
    for (const absl::Status& s : failures) {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "injected fault 1")) << s;
    }
    auto c = ConnectClient(**d);
    auto stats = GetStats(*c);
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(Hits(*stats, "error"), failures.size());
    auto list = ListFaults((*d)->address());
    ASSERT_TRUE(list.ok()) << list.status();
    ASSERT_EQ(list->faults_size(), 1);
    EXPECT_EQ(list->faults(0).origin(), "config");
    EXPECT_EQ(list->faults(0).matched(), 400u);
    EXPECT_EQ(list->faults(0).hits(), failures.size());
    EXPECT_EQ(list->seed(), 5u);
    EXPECT_TRUE(absl::StrContains((*d)->Stderr(), "fault 1 hit: get vol0")) << (*d)->Stderr();
    if (run == 0) {
      first = failed;
    } else {
      EXPECT_EQ(failed, first) << "the same seed and the same ops hit other ops";
    }
  }
}

TEST(FaultTest, ACorruptGetDeliversOneFlippedBitThatVerificationAndCrcCatch) {
  auto d = DaemonProcess::Start({"--volume", "vol0=16MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  v1::FaultSpec spec = Spec(v1::FAULT_CORRUPT);
  spec.set_count(1);
  ASSERT_TRUE(SetFault((*d)->address(), spec).ok());
  auto c = ConnectClient(**d);
  const uint64_t len = 3 * kMiB + 5, off = 777;
  auto buf = c->AllocateBuffer(len);
  ASSERT_TRUE(buf.ok());
  std::vector<std::byte> want(len);
  PatternFill(PatternSeed("vol0"), off, want);
  auto r = c->Write({"vol0", off, len}, **buf);
  ASSERT_TRUE(r.ok()) << r.status();  // the daemon answers OK: only verification can tell
  int bytes_off = 0, bits_off = 0;
  for (uint64_t i = 0; i < len; ++i) {
    const auto x = static_cast<unsigned>((*buf)->data()[i] ^ want[i]);
    if (x == 0) continue;
    ++bytes_off;
    bits_off += __builtin_popcount(x);
  }
  EXPECT_EQ(bytes_off, 1);
  EXPECT_EQ(bits_off, 1);
  // The store kept its bytes: the next get (count reached) is clean.
  auto again = c->Write({"vol0", off, len}, **buf);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(std::memcmp((*buf)->data(), want.data(), len), 0);

  // With CRC32C on, the client library fails the corrupted get.
  ASSERT_TRUE(SetFault((*d)->address(), spec).ok());
  auto crc = ConnectClient(**d, "", /*crc=*/true);
  auto cbuf = crc->AllocateBuffer(kMiB);
  ASSERT_TRUE(cbuf.ok());
  auto bad = crc->Write({"vol0", 0, kMiB}, **cbuf);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss) << bad.status();
  auto stats = GetStats(*c);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(Hits(*stats, "corrupt"), 2u);
}

TEST(FaultTest, AStallHoldsEveryNthOpAtLeastItsDelay) {
  auto d = DaemonProcess::Start({"--volume", "vol0=4MiB", "--fault",
                                 "kind=stall,volume=vol0,every=2,delay=300ms"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto c = ConnectClient(**d);
  auto buf = c->AllocateBuffer(64 * kKiB);
  ASSERT_TRUE(buf.ok());
  for (int i = 1; i <= 6; ++i) {
    const gdrstore::Extent e{"vol0", 0, 64 * kKiB};
    auto r = i % 3 == 0 ? c->Read(e, **buf) : c->Write(e, **buf);
    ASSERT_TRUE(r.ok()) << r.status();
    std::printf("op %d: service %.1f ms\n", i, r->service_ns / 1e6);
    // A lower bound only: the daemon answers no earlier than the stall's end.
    if (i % 2 == 0) {
      EXPECT_GE(r->service_ns, 300'000'000u) << i;
    }
  }
  auto stats = GetStats(*c);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(Hits(*stats, "stall"), 3u);
}

// A get held by a long stall, the rule cleared while it is held: it answers at once, OK, with
// the right bytes. `let_go` removes the rule (Admin ClearFaults, or SIGHUP to a configuration
// without it). Issue 29: a cleared stall kept holding the op it had caught.
void ExpectAClearedStallLetsGoOfItsOp(DaemonProcess& d, const std::function<void()>& let_go) {
  auto c = ConnectClient(d);
  ASSERT_NE(c, nullptr);
  auto buf = c->AllocateBuffer(64 * kKiB);
  ASSERT_TRUE(buf.ok());
  absl::StatusOr<gdrstore::OpResult> r;
  absl::Time answered;
  std::thread held([&] {
    r = c->Write({"vol0", 4096, 64 * kKiB}, **buf);
    answered = absl::Now();
  });
  // Caught: the rule has hit it (the daemon counts the hit when it decides to hold).
  const bool caught = PollUntil(
      [&] {
        auto l = ListFaults(d.address());
        return l.ok() && l->faults_size() == 1 && l->faults(0).hits() == 1;
      },
      absl::Seconds(30));
  const absl::Time cleared = absl::Now();
  let_go();
  held.join();
  ASSERT_TRUE(caught);
  ASSERT_TRUE(r.ok()) << r.status();
  // Well before the stall's 60 s: it was let go, not served out.
  EXPECT_LT(answered - cleared, absl::Seconds(20));
  EXPECT_LT(r->service_ns, 40'000'000'000u);
  std::vector<std::byte> want(64 * kKiB);
  PatternFill(PatternSeed("vol0"), 4096, want);
  EXPECT_EQ(std::memcmp((*buf)->data(), want.data(), want.size()), 0);
  // The rule is gone: the next get is not held.
  auto next = c->Write({"vol0", 0, 4 * kKiB}, **buf);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_LT(next->service_ns, 20'000'000'000u);
}

TEST(FaultTest, ClearingAStallRuleLetsGoOfTheOpItHolds) {
  auto d = DaemonProcess::Start({"--volume", "vol0=4MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto set = SetFault((*d)->address(), "kind=stall,volume=vol0,delay=60s");
  ASSERT_TRUE(set.ok()) << set.status();
  ExpectAClearedStallLetsGoOfItsOp(**d, [&] {
    v1::ClearFaultsRequest req;
    req.add_ids(set->id());
    absl::StatusOr<uint64_t> n = ClearFaults((*d)->address(), req);
    EXPECT_TRUE(n.ok() && *n == 1u) << n.status();
  });
}

TEST(FaultTest, AStallDroppedFromTheConfigurationOnSighupLetsGoOfTheOpItHolds) {
  auto dir = TempDir::Create("gdr-fault-hup");
  ASSERT_TRUE(dir.ok());
  const std::string config = (*dir)->File("gdrstored.conf");
  std::ofstream(config) << "volume = [\"vol0=4MiB\"]\n"
                        << "fault = [\"kind=stall,volume=vol0,delay=60s\"]\n";
  auto d = DaemonProcess::Start({"--config", config});
  ASSERT_TRUE(d.ok()) << d.status();
  ExpectAClearedStallLetsGoOfItsOp(**d, [&] {
    std::ofstream(config, std::ios::trunc) << "volume = [\"vol0=4MiB\"]\n";
    EXPECT_TRUE((*d)->Signal(SIGHUP).ok());
  });
}

TEST(FaultTest, ADroppedTcpLinkFailsItsOpAndTheNextOpsRunOnANewLink) {
  auto d = DaemonProcess::Start({"--volume", "vol0=16MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_TRUE(SetFault((*d)->address(), "kind=drop-link,volume=vol0,ops=put,count=1").ok());
  auto c = ConnectClient(**d);
  auto buf = c->AllocateBuffer(4 * kMiB);
  ASSERT_TRUE(buf.ok());
  PatternFill(PatternSeed("vol0", 3), 0, std::span((*buf)->data(), 4 * kMiB));
  auto lost = c->Read({"vol0", 0, 4 * kMiB}, **buf);
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  EXPECT_TRUE(absl::StrContains(lost.status().message(), "dropped by an injected fault"))
      << lost.status();
  // Nothing else is lost: the same put again, then a get of it, verified.
  ASSERT_TRUE(c->Read({"vol0", 0, 4 * kMiB}, **buf).ok());
  auto back = c->AllocateBuffer(4 * kMiB);
  ASSERT_TRUE(back.ok());
  ASSERT_TRUE(c->Write({"vol0", 0, 4 * kMiB}, **back).ok());
  EXPECT_EQ(std::memcmp((*back)->data(), (*buf)->data(), 4 * kMiB), 0);
  auto stats = GetStats(*c);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(Hits(*stats, "drop-link"), 1u);
  for (const v1::TransportStats& t : stats->transports()) {
    if (t.transport() == v1::TRANSPORT_TCP) {
      EXPECT_GE(t.pool().errors(), 1u);
    }
  }
}

TEST(FaultTest, TheAdminServiceNeedsAnAdminTokenAndRefusesBadRulesByField) {
  auto dir = TempDir::Create("gdr-fault");
  ASSERT_TRUE(dir.ok());
  const std::string tokens = (*dir)->File("tokens");
  std::ofstream(tokens) << kAdminToken << " name=ops admin=yes\n"
                        << kUserToken << " name=trainer get=vol0\n";
  ::chmod(tokens.c_str(), 0600);
  auto d = DaemonProcess::Start({"--volume", "vol0=4MiB", "--token-file", tokens});
  ASSERT_TRUE(d.ok()) << d.status();
  v1::FaultSpec spec = Spec(v1::FAULT_ERROR);
  const std::string at = (*d)->address();
  auto anon = SetFault(at, spec);
  EXPECT_EQ(anon.status().code(), absl::StatusCode::kUnauthenticated) << anon.status();
  auto user = SetFault(at, spec, kUserToken);
  EXPECT_EQ(user.status().code(), absl::StatusCode::kPermissionDenied) << user.status();
  EXPECT_TRUE(absl::StrContains(user.status().message(), "admin=yes")) << user.status();
  EXPECT_EQ(ListFaults(at, kUserToken).status().code(), absl::StatusCode::kPermissionDenied);

  const struct {
    std::function<void(v1::FaultSpec*)> spoil;
    const char* names;
  } bad[] = {
      {[](v1::FaultSpec* s) { s->set_kind(static_cast<v1::FaultKind>(99)); }, "kind"},
      {[](v1::FaultSpec* s) { s->set_rate(7); }, "rate"},
      {[](v1::FaultSpec* s) { s->set_code(400); }, "code"},
      {[](v1::FaultSpec* s) { s->set_volume(std::string(5000, 'x')); }, "volume"},
      {[](v1::FaultSpec* s) { s->set_client("a\nb"); }, "client"},
      {[](v1::FaultSpec* s) { s->set_delay_ms(5); }, "delay"},
      {[](v1::FaultSpec* s) { s->set_for_ms(~0ull); }, "for"},
  };
  for (const auto& b : bad) {
    v1::FaultSpec s = spec;
    b.spoil(&s);
    auto r = SetFault(at, s, kAdminToken);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << b.names;
    EXPECT_TRUE(absl::StartsWith(r.status().message(), absl::StrCat("fault ", b.names, ":")))
        << r.status();
  }
  v1::FaultSpec rail;
  rail.set_kind(v1::FAULT_RAIL_DOWN);
  rail.set_rail("mlx5_0");
  rail.set_for_ms(1000);
  EXPECT_EQ(SetFault(at, rail, kAdminToken).status().code(),
            absl::StatusCode::kFailedPrecondition);
  v1::ClearFaultsRequest unknown;
  unknown.add_ids(12345);
  absl::StatusOr<uint64_t> nf = ClearFaults(at, unknown, kAdminToken);
  EXPECT_EQ(nf.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(nf.status().message(), "12345")) << nf.status();
  // The admin's rule hits the user's ops; the daemon served everyone throughout.
  auto set = SetFault(at, spec, kAdminToken);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->origin(), "admin ops");
  auto c = ConnectClient(**d, kUserToken);
  auto buf = c->AllocateBuffer(4096);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(c->Write({"vol0", 0, 4096}, **buf).status().code(), absl::StatusCode::kUnavailable);
  v1::ClearFaultsRequest all;
  all.set_all(true);
  absl::StatusOr<uint64_t> cleared = ClearFaults(at, all, kAdminToken);
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_EQ(*cleared, 1u);
  EXPECT_TRUE(c->Write({"vol0", 0, 4096}, **buf).ok());
}

TEST(FaultTest, GdrctlSetsListsAndClearsRules) {
  auto dir = TempDir::Create("gdr-fault-ctl");
  ASSERT_TRUE(dir.ok());
  auto d = DaemonProcess::Start({"--volume", "vol0=4MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  int runs = 0;
  auto gdrctl = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {GDR_GDRCTL_BIN, "--daemon", (*d)->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunProcess(argv, (*dir)->path(), absl::StrCat("run", runs++), absl::Seconds(60));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ProcessResult{};
  };
  ProcessResult set = gdrctl({"fault", "set", "kind=error,volume=vol0,every=2,code=ABORTED"});
  ASSERT_EQ(set.exit_code, 0) << set.Describe();
  EXPECT_TRUE(absl::StrContains(set.out, "fault 1  kind=error,volume=vol0,every=2,code=ABORTED"))
      << set.out;
  // Every second get fails ABORTED, and gdrctl says so.
  EXPECT_EQ(gdrctl({"write", "--volume", "vol0", "-s", "4KiB"}).exit_code, 0);
  ProcessResult hit = gdrctl({"write", "--volume", "vol0", "-s", "4KiB"});
  EXPECT_EQ(hit.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(hit.err, "ABORTED")) << hit.err;
  ProcessResult list = gdrctl({"fault", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.Describe();
  v1::ListFaultsResponse parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(list.out, &parsed).ok()) << list.out;
  ASSERT_EQ(parsed.faults_size(), 1);
  EXPECT_EQ(parsed.faults(0).hits(), 1u);
  EXPECT_EQ(parsed.faults(0).matched(), 2u);
  ProcessResult stats = gdrctl({"stats"});
  EXPECT_TRUE(absl::StrContains(stats.out, "fault error on volume vol0: 1 hits")) << stats.out;
  // Usage errors: exit 2, before any RPC.
  EXPECT_EQ(gdrctl({"fault", "set", "kind=error,rate=3"}).exit_code, 2);
  EXPECT_EQ(gdrctl({"fault", "clear"}).exit_code, 2);
  EXPECT_EQ(gdrctl({"fault", "clear", "1", "--all"}).exit_code, 2);
  ProcessResult unknown = gdrctl({"fault", "clear", "9"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(unknown.err, "NOT_FOUND")) << unknown.err;
  ProcessResult clear = gdrctl({"fault", "clear", "1"});
  ASSERT_EQ(clear.exit_code, 0) << clear.Describe();
  EXPECT_TRUE(absl::StrContains(clear.out, "cleared 1 rule(s)"));
  EXPECT_EQ(gdrctl({"write", "--volume", "vol0", "-s", "4KiB"}).exit_code, 0);
  EXPECT_EQ(gdrctl({"write", "--volume", "vol0", "-s", "4KiB"}).exit_code, 0);
}

TEST(FaultTest, ConfiguredRulesFollowSighupAndABadOneStopsTheStart) {
  auto dir = TempDir::Create("gdr-fault-cfg");
  ASSERT_TRUE(dir.ok());
  const std::string config = (*dir)->File("gdrstored.conf");
  std::ofstream(config) << "volume = [\"vol0=4MiB\"]\nfault = [\"kind=error,ops=put\"]\n";
  auto d = DaemonProcess::Start({"--config", config});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string at = (*d)->address();
  EXPECT_EQ(SetFault(at, Spec(v1::FAULT_STALL, "other")).status().code(),
            absl::StatusCode::kInvalidArgument);  // a stall needs delay= or for=
  ASSERT_TRUE(SetFault(at, "kind=stall,volume=other,delay=1ms").ok());
  std::ofstream(config, std::ios::trunc)
      << "volume = [\"vol0=4MiB\"]\nfault = [\"kind=error,ops=get,every=3\", "
         "\"kind=corrupt,count=1\"]\n";
  ASSERT_TRUE((*d)->Signal(SIGHUP).ok());
  ASSERT_TRUE(PollUntil(
      [&] {
        auto l = ListFaults(at);
        return l.ok() && l->faults_size() == 3;
      },
      absl::Seconds(10)));
  auto l = ListFaults(at);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->faults(0).text(), "kind=stall,volume=other,delay=1ms");
  EXPECT_EQ(l->faults(1).text(), "kind=error,ops=get,every=3");
  EXPECT_EQ(l->faults(1).origin(), "config");
  EXPECT_EQ(l->faults(2).text(), "kind=corrupt,count=1");
  // The reload logs what it applied after the rules are in place: wait for the line.
  EXPECT_TRUE(PollUntil(
      [&] {
        return absl::StrContains((*d)->Stderr(), "fault rules: [kind=error,ops=put] -> [");
      },
      absl::Seconds(30)))
      << (*d)->Stderr();

  auto broken = DaemonProcess::Start({"--volume", "vol0=4MiB", "--fault", "kind=stall"});
  ASSERT_FALSE(broken.ok());
  EXPECT_TRUE(absl::StrContains(broken.status().message(), "--fault 'kind=stall': fault delay"))
      << broken.status();
}

}  // namespace
}  // namespace gdr::integ
