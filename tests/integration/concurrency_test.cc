// Case 2: eight gdrctl processes (verified writes and reads on disjoint ranges, and benches) and
// eight in-process clients on threads (verified ops on their own ranges), all at once against
// one daemon process.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/verified_ops.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kVol0 = 256 * kMiB;     // gdrctl write/read ranges
constexpr uint64_t kThreads = 128 * kMiB;  // in-process clients, 16 MiB each
constexpr uint64_t kBench = 64 * kMiB;

struct GdrctlRun {
  std::string name;
  std::vector<std::string> args;
  std::unique_ptr<ChildProcess> child;
};

// One in-process client doing verified ops on [base, base + span) of volume "threads".
absl::Status ThreadClient(const std::string& address, int index, uint64_t base, uint64_t span) {
  gdrstore::ClientOptions o;
  o.daemon_address = address;
  auto client = gdrstore::Client::Connect(o);
  if (!client.ok()) return client.status();
  constexpr uint64_t kMaxLen = 2 * kMiB;
  auto buf = (*client)->AllocateBuffer(kMaxLen + 8192);
  if (!buf.ok()) return buf.status();
  SaltMap salts(kThreads);
  std::mt19937_64 rng(1000 + index);
  std::uniform_real_distribution<double> log_size(0.0, std::log(double(kMaxLen)));
  for (int i = 0; i < 60; ++i) {
    const uint64_t len = std::clamp<uint64_t>(uint64_t(std::exp(log_size(rng))), 1, kMaxLen);
    const gdrstore::Extent e{"threads", base + rng() % (span - len + 1), len};
    const size_t boff = kGuardBytes + rng() % 4096;
    absl::Status s = i % 2 == 0 ? VerifiedRead(**client, **buf, boff, kGuardBytes + rng() % 4096, e,
                                               1 + index * 1000 + i, &salts)
                                : VerifiedWrite(**client, **buf, boff, e, salts);
    if (!s.ok())
      return absl::Status(s.code(), absl::StrCat("thread ", index, " op ", i, ": ", s.message()));
  }
  return absl::OkStatus();
}

TEST(ConcurrencyTest, EightGdrctlProcessesAndEightThreadClients) {
  auto d = DaemonProcess::Start({"--volume", absl::StrCat("vol0=", kVol0), "--volume",
                                 absl::StrCat("threads=", kThreads), "--volume",
                                 absl::StrCat("bench=", kBench)});
  ASSERT_TRUE(d.ok()) << d.status();
  DaemonProcess& daemon = **d;
  const std::string addr = daemon.address();

  std::vector<GdrctlRun> runs;
  auto add = [&runs](std::string name, std::vector<std::string> args) {
    GdrctlRun& r = runs.emplace_back();
    r.name = std::move(name);
    r.args = std::move(args);
  };
  // Disjoint unaligned ranges of vol0, 32 MiB apart.
  for (int k = 0; k < 3; ++k) {
    add(absl::StrCat("write", k),
        {"--daemon", addr, "write", "--volume", "vol0", "-o", std::to_string(k * 32 * kMiB + 3 + k),
         "-s", std::to_string(24 * kMiB - 5), "--buffer-offset", std::to_string(5 + k),
         "--verify"});
  }
  for (int k = 3; k < 6; ++k) {
    add(absl::StrCat("read", k),
        {"--daemon", addr, "read", "--volume", "vol0", "-o", std::to_string(k * 32 * kMiB + 7),
         "-s", std::to_string(24 * kMiB + 11), "--buffer-offset", "13", "--salt",
         std::to_string(100 + k), "--verify"});
  }
  add("bench_write", {"--daemon", addr, "bench", "-t", "write", "--volume", "bench", "-s", "1MiB",
                      "-n", "300", "--qd", "4", "-o", "0", "--span", "32MiB", "-q"});
  add("bench_read",
      {"--daemon", addr, "bench", "-t", "read", "--volume", "bench", "-s", "256KiB", "-n", "300",
       "--qd", "8", "--unary", "-o", std::to_string(32 * kMiB), "--span", "32MiB", "-q"});
  ASSERT_EQ(runs.size(), 8u);

  auto dir = TempDir::Create("gdrctl-concurrency");
  ASSERT_TRUE(dir.ok()) << dir.status();
  for (GdrctlRun& r : runs) {
    std::vector<std::string> argv = {GDR_GDRCTL_BIN};
    argv.insert(argv.end(), r.args.begin(), r.args.end());
    auto child =
        ChildProcess::Spawn(argv, (*dir)->File(r.name + ".out"), (*dir)->File(r.name + ".err"));
    ASSERT_TRUE(child.ok()) << child.status();
    r.child = std::move(*child);
  }

  std::vector<std::thread> threads;
  std::vector<absl::Status> results(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] { results[t] = ThreadClient(addr, t, t * 16 * kMiB, 16 * kMiB); });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < 8; ++t) EXPECT_TRUE(results[t].ok()) << results[t];

  for (GdrctlRun& r : runs) {
    auto st = r.child->Wait(absl::Seconds(120));
    ASSERT_TRUE(st.ok()) << r.name << ": " << st.status();
    const std::string out = ReadFileOrEmpty(r.child->stdout_path());
    const std::string err = ReadFileOrEmpty(r.child->stderr_path());
    EXPECT_EQ(DescribeWaitStatus(*st), "exited 0")
        << r.name << "\nstdout: " << out << "\nstderr: " << err;
    if (!absl::StartsWith(r.name, "bench")) {
      EXPECT_TRUE(absl::StrContains(out, "verified")) << r.name << ": " << out;
    } else {
      EXPECT_TRUE(absl::StrContains(out, "GB/s")) << r.name << ": " << out;
    }
  }

  // What the gdrctl reads stored is still there, and the writes' ranges still hold the fill.
  gdrstore::ClientOptions o;
  o.daemon_address = addr;
  auto client = gdrstore::Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto buf = (*client)->AllocateBuffer(25 * kMiB);
  ASSERT_TRUE(buf.ok());
  SaltMap salts(kVol0);
  for (int k = 3; k < 6; ++k) salts.Assign(k * 32 * kMiB + 7, 24 * kMiB + 11, 100 + k);
  for (int k = 0; k < 6; ++k) {
    const gdrstore::Extent e{"vol0", k * 32 * kMiB, 25 * kMiB - 2 * kGuardBytes};
    absl::Status s = VerifiedWrite(**client, **buf, kGuardBytes, e, salts);
    EXPECT_TRUE(s.ok()) << s;
  }

  auto st = daemon.Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << daemon.Stderr();
}

}  // namespace
}  // namespace gdr::integ
