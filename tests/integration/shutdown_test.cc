// Case 6: SIGTERM while ops are in flight: unary ops from an in-process client, a gdrctl bench
// process, and a Stream op hung on a target that never answers (which only the drain deadline
// can end). The daemon exits 0; every op completes or fails with a clean status; nothing crashes
// and nothing hangs.
#include <gtest/gtest.h>
#include <signal.h>

#include <future>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/src/daemon_rpc.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/silent_listener.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kOp = 32 * kMiB;
constexpr int kQueueDepth = 8;

// Codes an op may end with when the daemon goes away under it.
bool IsCleanShutdownCode(absl::StatusCode c) {
  return c == absl::StatusCode::kOk || c == absl::StatusCode::kCancelled ||
         c == absl::StatusCode::kUnavailable;
}

TEST(ShutdownTest, SigtermWithOpsInFlightExitsZero) {
  auto d = DaemonProcess::Start({"--volume", "vol0=256MiB", "--drain-timeout-ms", "2000"});
  ASSERT_TRUE(d.ok()) << d.status();
  DaemonProcess& daemon = **d;
  auto dir = TempDir::Create("gdr-shutdown");
  ASSERT_TRUE(dir.ok());

  gdrstore::ClientOptions o;
  o.daemon_address = daemon.address();
  o.rpc_timeout = std::chrono::milliseconds(60000);
  auto client = gdrstore::Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto buf = (*client)->AllocateBuffer(kQueueDepth * kOp);
  ASSERT_TRUE(buf.ok()) << buf.status();

  // A Stream op parked on a target that never answers: still in flight at SIGTERM.
  auto silent = SilentListener::Start();
  ASSERT_TRUE(silent.ok());
  grpc::ClientContext hung_ctx;
  hung_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto hung = gdr::DaemonStub(**client)->Stream(&hung_ctx);
  ASSERT_NE(hung, nullptr);
  {
    auto rb = (*client)->Describe(**buf, 0, 4096);
    ASSERT_TRUE(rb.ok());
    rb->mutable_tcp()->set_port((*silent)->port());
    rb->mutable_tcp()->set_secret((*silent)->secret());
    gdrstore::v1::StreamRequest msg;
    gdrstore::v1::StreamOp& req = *msg.add_ops();
    req.set_id(1);
    req.mutable_write()->mutable_extent()->set_volume("vol0");
    req.mutable_write()->mutable_extent()->set_length(4096);
    *req.mutable_write()->mutable_buffer() = *rb;
    ASSERT_TRUE(hung->Write(msg));
  }
  ASSERT_TRUE((*silent)->WaitForConnections(1, absl::Seconds(10)));

  // A gdrctl bench process with large ops.
  auto bench = ChildProcess::Spawn(
      {GDR_GDRCTL_BIN, "--daemon", daemon.address(), "bench", "-t", "write", "-s", "16MiB", "-n",
       "100000", "--qd", "4", "-q", "-o", std::to_string(128 * kMiB), "--span", "128MiB"},
      (*dir)->File("bench.out"), (*dir)->File("bench.err"));
  ASSERT_TRUE(bench.ok()) << bench.status();

  // Unary ops, kQueueDepth at a time: Writes (verified) of [0, 128 MiB), and Reads into the
  // bench's half (its bytes are not checked). `unanswered` counts ops whose callback has not
  // run: the daemon has not answered them yet.
  absl::Mutex mu;
  int unanswered = 0;
  int completed_ok = 0;
  std::vector<absl::Status> failures;
  std::atomic<bool> stop{false};
  std::thread driver([&] {
    uint64_t n = 0;
    while (!stop.load()) {
      std::vector<std::future<absl::StatusOr<gdrstore::OpResult>>> batch;
      std::vector<gdrstore::Extent> extents;
      for (int s = 0; s < kQueueDepth; ++s, ++n) {
        const bool write = s % 4 != 3;
        const gdrstore::Extent e{
            "vol0",
            write ? (n * 7 * kMiB + 11) % (96 * kMiB) : 128 * kMiB + (n * 5 * kMiB) % (96 * kMiB),
            kOp};
        extents.push_back(e);
        auto p = std::make_shared<std::promise<absl::StatusOr<gdrstore::OpResult>>>();
        batch.push_back(p->get_future());
        {
          absl::MutexLock lock(&mu);
          ++unanswered;
        }
        (*client)->SubmitAsync(write ? gdrstore::OpKind::kWrite : gdrstore::OpKind::kRead, e, **buf,
                               s * kOp, [&mu, &unanswered, p](auto r) {
                                 {
                                   absl::MutexLock lock(&mu);
                                   --unanswered;
                                 }
                                 p->set_value(std::move(r));
                               });
      }
      bool any_failed = false;
      for (int s = 0; s < kQueueDepth; ++s) {
        if (batch[s].wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
          absl::MutexLock lock(&mu);
          failures.push_back(absl::DeadlineExceededError("op never completed"));
          any_failed = true;
          continue;
        }
        absl::StatusOr<gdrstore::OpResult> r = batch[s].get();
        absl::MutexLock lock(&mu);
        if (!r.ok()) {
          failures.push_back(r.status());
          any_failed = true;
          continue;
        }
        ++completed_ok;
        if (extents[s].offset < 128 * kMiB) {
          std::span<const std::byte> got((*buf)->data() + s * kOp, kOp);
          if (auto bad = PatternMismatch(PatternSeed("vol0"), extents[s].offset, got)) {
            failures.push_back(
                absl::DataLossError(absl::StrCat("Write OK but byte ", *bad, " differs")));
          }
        }
      }
      if (any_failed) break;
    }
  });
  absl::Cleanup join_driver = [&] {
    stop.store(true);
    if (driver.joinable()) driver.join();
  };

  // SIGTERM once the bench is moving data, ops have completed, and unary ops are unanswered.
  ASSERT_TRUE(PollUntil(
      [&] {
        auto rss = ResidentBytes((*bench)->pid());
        return !(*bench)->Running() || (rss.ok() && *rss > 40 * kMiB);
      },
      absl::Seconds(60)));
  ASSERT_TRUE((*bench)->Running()) << "bench " << DescribeWaitStatus((*bench)->wait_status())
                                   << ": " << ReadFileOrEmpty((*bench)->stderr_path());
  int in_flight_at_signal = 0;
  absl::Status signalled = absl::UnknownError("not signalled");
  ASSERT_TRUE(PollUntil(
      [&] {
        absl::MutexLock lock(&mu);
        if (completed_ok < 2 * kQueueDepth || unanswered == 0) return false;
        in_flight_at_signal = unanswered;
        signalled = daemon.Signal(SIGTERM);
        return true;
      },
      absl::Seconds(60), absl::Milliseconds(1)));
  ASSERT_TRUE(signalled.ok()) << signalled;
  EXPECT_GT(in_flight_at_signal, 0);

  // Drain (2 s) plus slack; a hang here is a failure, not a test timeout.
  auto st = daemon.Wait(absl::Seconds(20));
  ASSERT_TRUE(st.ok()) << st.status() << "\ndaemon stderr:\n" << daemon.Stderr();
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << daemon.Stderr();
  EXPECT_TRUE(absl::StrContains(daemon.Stderr(), "stopped cleanly")) << daemon.Stderr();

  std::move(join_driver).Invoke();
  for (const absl::Status& s : failures) {
    EXPECT_TRUE(IsCleanShutdownCode(s.code())) << s;
    EXPECT_FALSE(s.message().empty());
  }

  // The hung stream op and its call end with a clean status too.
  gdrstore::v1::StreamResponse resp;
  while (hung->Read(&resp)) {
    for (const auto& r : resp.results()) {
      EXPECT_EQ(r.id(), 1u);
      EXPECT_TRUE(IsCleanShutdownCode(static_cast<absl::StatusCode>(r.code())))
          << r.code() << ": " << r.message();
    }
  }
  grpc::Status fin = hung->Finish();
  EXPECT_TRUE(IsCleanShutdownCode(static_cast<absl::StatusCode>(fin.error_code())))
      << fin.error_code() << ": " << fin.error_message();

  // The bench fails its op cleanly: exit 1 with a one-line reason, no signal.
  auto bst = (*bench)->Wait(absl::Seconds(30));
  ASSERT_TRUE(bst.ok()) << bst.status();
  const std::string berr = ReadFileOrEmpty((*bench)->stderr_path());
  EXPECT_EQ(DescribeWaitStatus(*bst), "exited 1") << berr;
  EXPECT_TRUE(absl::StrContains(berr, "UNAVAILABLE") || absl::StrContains(berr, "CANCELLED"))
      << berr;
}

}  // namespace
}  // namespace gdr::integ
