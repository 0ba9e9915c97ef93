// A stuck completion path must stop the systemd watchdog pings. Real pieces throughout: the
// daemon's TcpInitiator against a target that never answers, its stall detection failing the op
// on the housekeeping thread, an op completion that then blocks that thread (the stuck poller),
// the daemon's HealthMonitor and SystemdNotifier, and a real AF_UNIX notify socket.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/src/transport/tcp/tcp_target.h"
#include "common/process/health_monitor.h"
#include "common/process/systemd_notifier.h"
#include "daemon/transport/tcp/tcp_initiator.h"
#include "daemon/transport/transport_set.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/notify_listener.h"
#include "tests/integration/silent_listener.h"

namespace gdr::integ {
namespace {

int CountPings(const NotifyListener& sd, size_t from) {
  auto all = sd.messages();
  int n = 0;
  for (size_t i = from; i < all.size(); ++i) n += all[i].Has("WATCHDOG=1");
  return n;
}

// Once a STATUS line matching `unhealthy` has been sent, three more monitor rounds (longer than
// the 400 ms watchdog timeout) pass without a ping; after `release` pings resume.
void ExpectPingsWithheldUntilRelease(const NotifyListener& sd, const HealthMonitor& monitor,
                                     const std::function<bool(const std::string&)>& unhealthy,
                                     absl::Notification& release, const std::string& what) {
  // A failed assertion must not leave the stuck thread blocked: the test would hang in teardown.
  absl::Cleanup unstick = [&] {
    if (!release.HasBeenNotified()) release.Notify();
  };
  ASSERT_TRUE(PollUntil(
      [&] {
        for (const auto& m : sd.messages())
          if (unhealthy(m.Get("STATUS"))) return true;
        return false;
      },
      absl::Seconds(10)));
  const size_t mark = sd.size();
  const uint64_t failed_at_mark = monitor.failed_rounds();
  ASSERT_TRUE(PollUntil([&] { return monitor.failed_rounds() >= failed_at_mark + 3; },
                        absl::Seconds(10)));
  EXPECT_EQ(CountPings(sd, mark), 0) << "WATCHDOG=1 sent while " << what;
  release.Notify();
  const size_t after = sd.size();
  EXPECT_GE(sd.WaitFor("WATCHDOG=1", after, absl::Seconds(10)), 0);
}

TEST(WatchdogStallTest, StuckCompletionThreadStopsPingsUntilItRecovers) {
  auto dir = TempDir::Create("gdr-wdstall");
  ASSERT_TRUE(dir.ok());
  auto listener = NotifyListener::Bind((*dir)->File("notify.sock"));
  ASSERT_TRUE(listener.ok()) << listener.status();
  NotifyListener& sd = **listener;
  // What systemd puts in the environment of a Type=notify unit with WatchdogSec=400ms.
  ASSERT_EQ(::setenv("NOTIFY_SOCKET", sd.path().c_str(), 1), 0);
  ASSERT_EQ(::setenv("WATCHDOG_USEC", "400000", 1), 0);
  ::unsetenv("WATCHDOG_PID");
  auto notifier = SystemdNotifier::FromEnvironment();
  ASSERT_TRUE(notifier->enabled());
  ASSERT_EQ(notifier->watchdog_timeout(), absl::Milliseconds(400));

  TcpInitiatorOptions o;
  o.op_timeout = absl::Milliseconds(150);
  auto tcp = TcpInitiator::Create(o);
  ASSERT_TRUE(tcp.ok());
  const absl::Duration period = notifier->watchdog_timeout() / 2;
  const absl::Duration max_stall = absl::Milliseconds(300);
  HealthMonitor monitor(notifier.get(), period, [] { return std::string("test status"); });
  // As in the daemon: the watchdog asks the set of transports, which asks each one.
  TransportSet transports;
  transports.Add(std::move(*tcp));
  monitor.AddProbe("transport", [&] { return transports.CheckHealth(max_stall); });
  monitor.Start();
  ASSERT_GE(sd.WaitFor("WATCHDOG=1", 0, absl::Seconds(10)), 0);

  // An op to a target that never answers: after op_timeout the housekeeping thread fails it and
  // runs its completion, which blocks until `release`.
  auto silent = SilentListener::Start();
  ASSERT_TRUE(silent.ok());
  std::vector<std::byte> mem(4096);
  TransferOp op;
  op.direction = Direction::kStoreToClient;
  op.volume = "vol0";
  op.local = mem.data();
  op.length = mem.size();
  op.remote_address = 0x1000;
  op.rkey = 7;
  op.destination =
      std::make_shared<const TcpDestination>("127.0.0.1", (*silent)->port(), (*silent)->secret());
  op.caller = "ipv4:127.0.0.1:1";
  absl::Notification stuck, release;
  absl::Status op_status;
  ASSERT_TRUE(transports
                  .Submit(op,
                           [&](absl::Status s) {
                             op_status = s;
                             stuck.Notify();
                             release.WaitForNotification();
                           })
                  .ok());
  ASSERT_TRUE(stuck.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(op_status)) << op_status;

  // The monitor notices within max_stall plus a period, then withholds pings until unstuck.
  ExpectPingsWithheldUntilRelease(
      sd, monitor,
      [](const std::string& s) {
        return absl::StartsWith(s, "UNHEALTHY: transport: tcp housekeeping");
      },
      release, "the completion thread was stuck");
  monitor.Stop();
  transports.Shutdown();
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
}

// The other completion poller: a link's receiver thread that answers an op and then sits in its
// completion callback. The target answers normally; the daemon-side thread is what is stuck.
TEST(WatchdogStallTest, StuckReceiverCompletionStopsPings) {
  auto dir = TempDir::Create("gdr-wdstall");
  ASSERT_TRUE(dir.ok());
  auto listener = NotifyListener::Bind((*dir)->File("notify.sock"));
  ASSERT_TRUE(listener.ok()) << listener.status();
  NotifyListener& sd = **listener;
  ASSERT_EQ(::setenv("NOTIFY_SOCKET", sd.path().c_str(), 1), 0);
  ASSERT_EQ(::setenv("WATCHDOG_USEC", "400000", 1), 0);
  auto notifier = SystemdNotifier::FromEnvironment();
  ASSERT_EQ(notifier->watchdog_timeout(), absl::Milliseconds(400));

  auto target = TcpTarget::Start("127.0.0.1", 0, 16);
  ASSERT_TRUE(target.ok()) << target.status();
  std::vector<std::byte> remote(8192), local(8192);
  auto region = std::make_shared<Region>();
  region->base = reinterpret_cast<uint64_t>(remote.data());
  region->size = remote.size();
  region->host = remote.data();
  (*target)->Register(region);

  auto tcp = TcpInitiator::Create({});
  ASSERT_TRUE(tcp.ok());
  const absl::Duration max_stall = absl::Milliseconds(300);
  HealthMonitor monitor(notifier.get(), notifier->watchdog_timeout() / 2,
                        [] { return std::string("test status"); });
  // As in the daemon: the watchdog asks the set of transports, which asks each one.
  TransportSet transports;
  transports.Add(std::move(*tcp));
  monitor.AddProbe("transport", [&] { return transports.CheckHealth(max_stall); });
  monitor.Start();
  ASSERT_GE(sd.WaitFor("WATCHDOG=1", 0, absl::Seconds(10)), 0);

  TransferOp op;
  op.direction = Direction::kStoreToClient;
  op.volume = "vol0";
  op.local = local.data();
  op.length = 4096;
  op.remote_address = region->base;
  op.rkey = region->rkey;
  op.destination =
      std::make_shared<const TcpDestination>("127.0.0.1", (*target)->port(), (*target)->secret());
  op.caller = "ipv4:127.0.0.1:1";
  absl::Notification stuck, release;
  absl::Status op_status;
  ASSERT_TRUE(transports
                  .Submit(op,
                           [&](absl::Status s) {
                             op_status = s;
                             stuck.Notify();
                             release.WaitForNotification();
                           })
                  .ok());
  ASSERT_TRUE(stuck.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(op_status.ok()) << op_status;
  ExpectPingsWithheldUntilRelease(
      sd, monitor,
      [](const std::string& s) {
        return absl::StrContains(s, "has been inside one op completion");
      },
      release, "a receiver was stuck");
  monitor.Stop();
  transports.Shutdown();
  (*target)->Stop();
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
}

}  // namespace
}  // namespace gdr::integ
