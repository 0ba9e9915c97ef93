// gdrstored under a stand-in for systemd: the test binds a real AF_UNIX datagram socket, starts
// the real daemon with NOTIFY_SOCKET and WATCHDOG_USEC, and checks the protocol end to end:
// READY=1 only once the port answers, WATCHDOG=1 within every watchdog period, STATUS lines
// that follow the traffic, RELOADING=1/READY=1 around SIGHUP (with the reload applied),
// STOPPING=1 on SIGTERM and exit 0 once in-flight ops are done.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <future>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/src/daemon_rpc.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/notify_listener.h"

namespace gdr::integ {
namespace {

constexpr int64_t kWatchdogUsec = 2'000'000;

uint16_t ReadPort(const std::string& file) {
  uint32_t port = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFileOrEmpty(file)), &port)) return 0;
  return static_cast<uint16_t>(port);
}

void WriteConfig(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

TEST(SystemdNotifyTest, ReadyWatchdogReloadStoppingDrain) {
  auto dir = TempDir::Create("gdr-notify");
  ASSERT_TRUE(dir.ok());
  const std::string port_file = (*dir)->File("port");
  const std::string config = (*dir)->File("gdrstored.conf");
  WriteConfig(config,
              "volume = [\"vol0=512MiB\", \"slow=16MiB,latency_us=400000\"]\n"
              "max-op-size = \"64MiB\"\nlog-level = \"info\"\n");

  // At the moment READY=1 arrives, the port must already be written and answering.
  std::atomic<bool> ready_seen{false};
  std::atomic<bool> port_known_at_ready{false};
  std::atomic<bool> serving_at_ready{false};
  auto notify = NotifyListener::Bind((*dir)->File("notify.sock"), [&](const NotifyMessage& m) {
    if (!m.Has("READY=1") || ready_seen.exchange(true)) return;
    const uint16_t port = ReadPort(port_file);
    port_known_at_ready = port != 0;
    if (port != 0) {
      auto h = HealthCheck(absl::StrCat("127.0.0.1:", port), absl::Seconds(2));
      serving_at_ready = h.ok() && *h;
    }
  });
  ASSERT_TRUE(notify.ok()) << notify.status();
  NotifyListener& sd = **notify;

  auto child = ChildProcess::SpawnWithEnv(
      {GDR_GDRSTORED_BIN, "--config", config, "--listen", "127.0.0.1:0", "--port-file", port_file},
      {"NOTIFY_SOCKET=" + sd.path(), absl::StrCat("WATCHDOG_USEC=", kWatchdogUsec)},
      (*dir)->File("stdout"), (*dir)->File("stderr"));
  ASSERT_TRUE(child.ok()) << child.status();
  ChildProcess& daemon = **child;
  auto stderr_text = [&] { return ReadFileOrEmpty(daemon.stderr_path()); };

  const int ready = sd.WaitFor("READY=1", 0, absl::Seconds(60));
  ASSERT_GE(ready, 0) << "no READY=1; stderr:\n" << stderr_text();
  EXPECT_TRUE(port_known_at_ready) << "READY=1 before the port file was written";
  EXPECT_TRUE(serving_at_ready) << "READY=1 before the gRPC port answered";
  for (int i = 0; i < ready; ++i) {
    EXPECT_FALSE(sd.messages()[i].Has("WATCHDOG=1")) << "watchdog ping before READY";
  }
  EXPECT_TRUE(absl::StrContains(sd.messages()[ready].Get("STATUS"), "serving on"))
      << sd.messages()[ready].text;
  const uint16_t port = ReadPort(port_file);
  const std::string address = absl::StrCat("127.0.0.1:", port);

  // Watchdog: pings keep coming, never further apart than WATCHDOG_USEC, and not spammed.
  const absl::Time watch_start = absl::Now();
  ASSERT_TRUE(PollUntil(
      [&] {
        int pings = 0;
        for (const auto& m : sd.messages()) pings += m.Has("WATCHDOG=1") && m.at >= watch_start;
        return pings >= 4;
      },
      absl::Seconds(30)))
      << stderr_text();
  std::vector<absl::Time> pings;
  for (const auto& m : sd.messages())
    if (m.Has("WATCHDOG=1")) pings.push_back(m.at);
  for (size_t i = 1; i < pings.size(); ++i) {
    const absl::Duration gap = pings[i] - pings[i - 1];
    EXPECT_LT(gap, absl::Microseconds(kWatchdogUsec)) << "ping " << i;
    EXPECT_GT(gap, absl::Microseconds(kWatchdogUsec / 5)) << "ping " << i;
  }

  // STATUS follows the traffic.
  gdrstore::ClientOptions o;
  o.daemon_address = address;
  auto client = gdrstore::Client::Connect(o);
  ASSERT_TRUE(client.ok()) << client.status();
  auto buf = (*client)->AllocateBuffer(4 << 20);
  ASSERT_TRUE(buf.ok());
  ASSERT_TRUE((*client)->Write({"vol0", 0, 1 << 20}, **buf).ok());
  const size_t before_status = sd.size();
  ASSERT_TRUE(PollUntil(
      [&] {
        auto all = sd.messages();
        for (size_t i = before_status; i < all.size(); ++i) {
          if (absl::StrContains(all[i].Get("STATUS"), "in 1 ops")) return true;
        }
        return false;
      },
      absl::Seconds(10)));

  // SIGHUP: RELOADING=1 then READY=1, and the new limit is live.
  WriteConfig(config,
              "volume = [\"vol0=512MiB\", \"slow=16MiB,latency_us=400000\"]\n"
              "max-op-size = \"1MiB\"\nlog-level = \"info\"\nchunk-size = \"256KiB\"\n");
  const size_t before_hup = sd.size();
  ASSERT_TRUE(daemon.Signal(SIGHUP).ok());
  const int reloading = sd.WaitFor("RELOADING=1", before_hup, absl::Seconds(10));
  ASSERT_GE(reloading, 0) << stderr_text();
  EXPECT_FALSE(sd.messages()[reloading].Get("MONOTONIC_USEC").empty());
  const int reready = sd.WaitFor("READY=1", reloading + 1, absl::Seconds(10));
  ASSERT_GE(reready, 0) << stderr_text();
  auto info = (*client)->GetInfo();
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->limits().max_op_bytes(), 1u << 20);
  EXPECT_EQ(info->limits().chunk_bytes(), 1u << 20) << "chunk size must not change live";
  auto too_big = (*client)->Write({"vol0", 0, 2 << 20}, **buf);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument) << too_big.status();
  EXPECT_TRUE(absl::StrContains(stderr_text(), "max-op-size: 64 MiB -> 1 MiB")) << stderr_text();
  EXPECT_TRUE(absl::StrContains(stderr_text(), "NOT applied (needs a restart): chunk-size"))
      << stderr_text();

  // SIGTERM with ops in flight on the slow volume (400 ms media latency each).
  constexpr int kSlowOps = 4;
  std::vector<std::future<absl::StatusOr<gdrstore::OpResult>>> slow;
  for (int i = 0; i < kSlowOps; ++i) {
    slow.push_back((*client)->SubmitAsync(gdrstore::OpKind::kWrite, {"slow", i * 4096u, 4096},
                                          **buf, i * 4096u));
  }
  ASSERT_TRUE(PollUntil(
      [&] {
        grpc::ClientContext ctx;
        gdrstore::v1::GetStatsRequest req;
        gdrstore::v1::GetStatsResponse resp;
        return gdr::DaemonStub(**client)->GetStats(&ctx, req, &resp).ok() &&
               resp.admission().inflight_ops() == kSlowOps;
      },
      absl::Seconds(10), absl::Milliseconds(5)));
  const size_t before_term = sd.size();
  ASSERT_TRUE(daemon.Signal(SIGTERM).ok());
  const int stopping = sd.WaitFor("STOPPING=1", before_term, absl::Seconds(10));
  ASSERT_GE(stopping, 0) << stderr_text();
  auto st = daemon.Wait(absl::Seconds(30));
  ASSERT_TRUE(st.ok()) << st.status() << stderr_text();
  EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << stderr_text();
  for (auto& f : slow) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    auto r = f.get();
    EXPECT_TRUE(r.ok()) << "an op in flight at SIGTERM must complete in the drain: " << r.status();
  }
  auto all = sd.messages();
  for (size_t i = stopping + 1; i < all.size(); ++i) {
    EXPECT_FALSE(all[i].Has("WATCHDOG=1")) << "watchdog ping after STOPPING=1";
  }
  EXPECT_TRUE(absl::StrContains(stderr_text(), "stopped cleanly")) << stderr_text();
}

// Under journald (JOURNAL_STREAM names stderr's device:inode) lines carry <N> priorities
// instead of timestamps; with a JOURNAL_STREAM that is not stderr they do not.
TEST(SystemdNotifyTest, JournaldPriorityPrefixes) {
  auto dir = TempDir::Create("gdr-journal");
  ASSERT_TRUE(dir.ok());
  for (bool matching : {true, false}) {
    const std::string err = (*dir)->File(matching ? "journal.err" : "other.err");
    std::ofstream(err).flush();  // the spawn opens it with O_TRUNC: same inode
    struct stat st {};
    ASSERT_EQ(::stat(err.c_str(), &st), 0);
    const std::string stream =
        absl::StrCat(static_cast<unsigned long long>(st.st_dev), ":",
                     static_cast<unsigned long long>(st.st_ino) + (matching ? 0 : 1));
    // Info, debug and (on SIGHUP) reload lines; every one must carry the right prefix.
    auto r = ChildProcess::SpawnWithEnv(
        {GDR_GDRSTORED_BIN, "--listen", "127.0.0.1:0", "--volume", "v=4MiB,latency_us=5",
         "--port-file", (*dir)->File("port"), "--log-level", "debug"},
        {"JOURNAL_STREAM=" + stream}, (*dir)->File("out"), err);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(PollUntil([&] { return absl::StrContains(ReadFileOrEmpty(err), "port ") ||
                                       absl::StrContains(ReadFileOrEmpty(err), "serving"); },
                          absl::Seconds(30)));
    ASSERT_TRUE((*r)->Signal(SIGHUP).ok());  // reload of argv-only settings: logs at info
    ASSERT_TRUE(PollUntil([&] { return absl::StrContains(ReadFileOrEmpty(err), "SIGHUP"); },
                          absl::Seconds(10)));
    ASSERT_TRUE((*r)->Signal(SIGTERM).ok());
    auto st2 = (*r)->Wait(absl::Seconds(30));
    ASSERT_TRUE(st2.ok());
    const std::string text = ReadFileOrEmpty(err);
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      if (matching) {
        EXPECT_TRUE(absl::StartsWith(line, "<6>I ") || absl::StartsWith(line, "<7>D ") ||
                    absl::StartsWith(line, "<4>W ") || absl::StartsWith(line, "<3>E "))
            << line;
      } else {
        EXPECT_FALSE(absl::StartsWith(line, "<")) << line;
      }
    }
  }
}

}  // namespace
}  // namespace gdr::integ
