// What a client does when the daemon would not admit its ops yet, and when the daemon does not
// answer at all: a Stream or many unary callers hand over any number of ops and every one
// completes (the client holds what the daemon's in-flight limits would refuse), the refusal
// comes back only when asked for (fail_when_full), and every op ends by its deadline on every
// path, also against a daemon stopped with SIGSTOP.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kKiB = 1024;


std::unique_ptr<gdrstore::Client> Connect(const DaemonProcess& d,
                                          std::chrono::milliseconds timeout,
                                          bool fail_when_full = false) {
  gdrstore::ClientOptions o;
  o.rpc_timeout = timeout;
  o.fail_when_full = fail_when_full;
  return ConnectClient(d, std::move(o));
}

// Every op's outcome, collected from the callbacks.
struct Outcomes {
  absl::Mutex mu;
  std::vector<absl::Status> done ABSL_GUARDED_BY(mu);
  void Add(const absl::StatusOr<gdrstore::OpResult>& r) {
    absl::MutexLock lock(&mu);
    done.push_back(r.status());
  }
  bool WaitFor(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return done.size() >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }
};

// `ops` gets of `len` bytes each, volume offset i*len into buffer offset i*len, handed to one
// Stream at once; every outcome, once all have come (or what came within two minutes).
std::vector<absl::Status> Burst(gdrstore::Client& c, const gdrstore::Buffer& buf, int ops,
                                uint64_t len) {
  auto stream = c.OpenStream();
  if (!stream.ok()) return {stream.status()};
  Outcomes out;
  for (int i = 0; i < ops; ++i) {
    (*stream)->Submit(gdrstore::OpKind::kWrite, {"vol0", i * len, len}, buf, i * len,
                      [&out](absl::StatusOr<gdrstore::OpResult> r) { out.Add(r); });
  }
  const bool all = out.WaitFor(ops, absl::Seconds(120));
  (void)(*stream)->Close();  // an op left over still answers into `out` before this returns
  absl::MutexLock lock(&out.mu);
  std::vector<absl::Status> done = out.done;
  if (!all) done.push_back(absl::DeadlineExceededError("not every op was answered in 120 s"));
  return done;
}

// A daemon whose limits are far below what one burst asks for.
std::unique_ptr<DaemonProcess> TightDaemon() {
  auto d = DaemonProcess::Start({"--volume", "vol0=64MiB", "--max-inflight-per-stream", "4",
                                 "--max-inflight-ops", "6", "--max-inflight-bytes", "1MiB"});
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::move(*d) : nullptr;
}

TEST(BackpressureTest, AStreamHandedFarMoreThanTheDaemonAdmitsCompletesEveryOpVerified) {
  auto d = TightDaemon();
  ASSERT_NE(d, nullptr);
  auto c = Connect(*d, std::chrono::seconds(60));
  ASSERT_NE(c, nullptr);
  constexpr int kOps = 64;
  constexpr uint64_t kLen = 256 * kKiB;  // 64 x 256 KiB = 16 MiB against a 1 MiB budget
  auto buf = c->AllocateBuffer(kOps * kLen);
  ASSERT_TRUE(buf.ok()) << buf.status();
  const std::vector<absl::Status> done = Burst(*c, **buf, kOps, kLen);
  EXPECT_EQ(done.size(), static_cast<size_t>(kOps));
  for (const absl::Status& s : done) EXPECT_TRUE(s.ok()) << s;
  auto bad = PatternMismatch(PatternSeed("vol0"), 0, std::span((*buf)->data(), kOps * kLen));
  EXPECT_FALSE(bad.has_value()) << "byte " << *bad << " differs from the volume's pattern";
  // Held in the client once it knows the limits, or sent again after the daemon's refusal
  // before it does: either way the burst met the limits and nothing failed.
  const gdrstore::Client::WindowStats w = c->window_stats();
  EXPECT_GT(w.waited + w.resent, 0u) << "the burst never met the limits";
}

TEST(BackpressureTest, FailWhenFullHandsTheDaemonsRefusalToTheCaller) {
  auto d = TightDaemon();
  ASSERT_NE(d, nullptr);
  auto c = Connect(*d, std::chrono::seconds(60), /*fail_when_full=*/true);
  ASSERT_NE(c, nullptr);
  constexpr int kOps = 64;
  constexpr uint64_t kLen = 256 * kKiB;
  auto buf = c->AllocateBuffer(kOps * kLen);
  ASSERT_TRUE(buf.ok()) << buf.status();
  int refused = 0;
  for (const absl::Status& s : Burst(*c, **buf, kOps, kLen)) {
    if (s.ok()) continue;
    EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "max_inflight")) << s;
    ++refused;
  }
  EXPECT_GT(refused, 0);
}

TEST(BackpressureTest, UnaryCallsFromManyThreadsAtOnceAllComplete) {
  auto d = TightDaemon();
  ASSERT_NE(d, nullptr);
  auto c = Connect(*d, std::chrono::seconds(60));
  ASSERT_NE(c, nullptr);
  constexpr int kThreads = 16, kEach = 12;
  constexpr uint64_t kLen = 192 * kKiB;  // 16 x 192 KiB at once: 3 MiB against 1 MiB
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto buf = c->AllocateBuffer(kLen);
      if (!buf.ok()) {
        errors[t] = std::string(buf.status().message());
        failed.fetch_add(1);
        return;
      }
      for (int i = 0; i < kEach; ++i) {
        const uint64_t off = (t * kEach + i) * kLen;
        absl::StatusOr<gdrstore::OpResult> r = c->Write({"vol0", off, kLen}, **buf);
        if (!r.ok()) {
          errors[t] = std::string(r.status().ToString());
          failed.fetch_add(1);
          return;
        }
        if (auto bad = PatternMismatch(PatternSeed("vol0"), off, std::span((*buf)->data(), kLen))) {
          errors[t] = "pattern differs";
          failed.fetch_add(1);
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);
  for (const std::string& e : errors) EXPECT_TRUE(e.empty()) << e;
}

TEST(BackpressureTest, TwoClientsSharingTheDaemonsRoomEachCompleteEveryOp) {
  auto d = TightDaemon();
  ASSERT_NE(d, nullptr);
  // Each client keeps to the daemon's limits; together they exceed them, and the refusals the
  // daemon answers the one that comes second are sent again.
  constexpr int kOps = 48;
  constexpr uint64_t kLen = 128 * kKiB;
  auto run = [&](int) -> std::vector<absl::Status> {
    auto c = Connect(*d, std::chrono::seconds(60));
    if (c == nullptr) return {absl::InternalError("no client")};
    auto buf = c->AllocateBuffer(kOps * kLen);
    if (!buf.ok()) return {buf.status()};
    return Burst(*c, **buf, kOps, kLen);
  };
  auto a = std::async(std::launch::async, run, 0);
  auto b = std::async(std::launch::async, run, 1);
  for (auto* f : {&a, &b}) {
    std::vector<absl::Status> got = f->get();
    EXPECT_EQ(got.size(), static_cast<size_t>(kOps));
    for (const absl::Status& s : got) EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(DeadlineTest, StreamAndUnaryOpsOnAStoppedDaemonEndAtTheirDeadline) {
  auto d = DaemonProcess::Start({"--volume", "vol0=8MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  constexpr auto kTimeout = std::chrono::seconds(2);
  auto c = Connect(**d, kTimeout);
  ASSERT_NE(c, nullptr);
  auto buf = c->AllocateBuffer(64 * kKiB);
  ASSERT_TRUE(buf.ok());
  auto stream = c->OpenStream();
  ASSERT_TRUE(stream.ok());
  {
    std::promise<absl::Status> warm;
    (*stream)->Submit(gdrstore::OpKind::kWrite, {"vol0", 0, 4096}, **buf, 0,
                      [&](absl::StatusOr<gdrstore::OpResult> r) { warm.set_value(r.status()); });
    ASSERT_TRUE(warm.get_future().get().ok());
  }
  ASSERT_TRUE((*d)->Stop().ok());
  absl::Cleanup resume = [&] { (void)(*d)->Signal(SIGCONT); };  // however the test ends

  const absl::Time t0 = absl::Now();
  auto got = std::make_shared<std::promise<absl::Status>>();
  auto answer = got->get_future();
  (*stream)->Submit(gdrstore::OpKind::kWrite, {"vol0", 4096, 4096}, **buf, 4096,
                    [got](absl::StatusOr<gdrstore::OpResult> r) { got->set_value(r.status()); });
  // Well past the deadline, so that an op that never ends fails here instead of hanging.
  ASSERT_EQ(answer.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "a Stream op on a stopped daemon was not answered 30 s after its 2 s deadline";
  const absl::Duration took = absl::Now() - t0;
  absl::Status s = answer.get();
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_GE(took, absl::FromChrono(kTimeout) - absl::Milliseconds(5)) << "ended before its deadline";

  // The stream's Close gives up on the hung call instead of waiting for it.
  auto closed = std::async(std::launch::async, [&] { return (*stream)->Close(); });
  EXPECT_EQ(closed.wait_for(std::chrono::seconds(30)), std::future_status::ready);

  absl::StatusOr<gdrstore::OpResult> unary = c->Write({"vol0", 0, 4096}, **buf);
  EXPECT_TRUE(absl::IsDeadlineExceeded(unary.status())) << unary.status();

  ASSERT_TRUE((*d)->Signal(SIGCONT).ok());
  std::move(resume).Cancel();
  // Once resumed, the daemon serves again (after it has caught up with what waited).
  EXPECT_TRUE(PollUntil([&] { return c->Write({"vol0", 0, 4096}, **buf).ok(); },
                        absl::Seconds(30), absl::Milliseconds(100)));
  if (closed.valid()) (void)closed.get();
}

TEST(DeadlineTest, AnOpWaitingForRoomFailsAtItsDeadlineNamingTheLimits) {
  // Every op is stalled 8 s and a stream may have one in flight: the second waits in the client.
  auto d = DaemonProcess::Start({"--volume", "vol0=8MiB", "--max-inflight-per-stream", "1",
                                 "--fault", "kind=stall,delay=8s"});
  ASSERT_TRUE(d.ok()) << d.status();
  auto c = Connect(**d, std::chrono::seconds(30));
  ASSERT_NE(c, nullptr);
  // Learn the limits before the burst (the client asks for them when it connects).
  ASSERT_TRUE(c->GetInfo().ok());
  ASSERT_TRUE(PollUntil([&] { return c->window_stats().limits_known; }, absl::Seconds(10)));
  auto buf = c->AllocateBuffer(8192);
  ASSERT_TRUE(buf.ok());
  // One call: the daemon's limit is per Stream call, and ops spread over several would each
  // find room on their own.
  auto stream = c->OpenStream({.calls = 1});
  ASSERT_TRUE(stream.ok());
  Outcomes out;
  const auto now = std::chrono::system_clock::now();
  // The first is sent and held by the daemon past its 4 s deadline; the second, due in 2 s,
  // never gets room.
  for (int i = 0; i < 2; ++i) {
    (*stream)->Submit(gdrstore::OpKind::kWrite, {"vol0", i * 4096u, 4096}, **buf, i * 4096u,
                      [&out](absl::StatusOr<gdrstore::OpResult> r) { out.Add(r); },
                      {.deadline = now + std::chrono::seconds(i == 0 ? 4 : 2)});
  }
  ASSERT_TRUE(out.WaitFor(2, absl::Seconds(30)));
  absl::MutexLock lock(&out.mu);
  ASSERT_EQ(out.done.size(), 2u);
  // Answers come in the order the deadlines passed.
  EXPECT_TRUE(absl::IsDeadlineExceeded(out.done[0])) << out.done[0];
  EXPECT_TRUE(absl::StrContains(out.done[0].message(), "room under the daemon's in-flight limits"))
      << out.done[0];
  EXPECT_TRUE(absl::IsDeadlineExceeded(out.done[1])) << out.done[1];
  EXPECT_TRUE(absl::StrContains(out.done[1].message(), "did not answer")) << out.done[1];
}

}  // namespace
}  // namespace gdr::integ
