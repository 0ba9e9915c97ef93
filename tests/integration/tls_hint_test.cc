// The hint a plaintext client adds to a failed connection ("the daemon probably requires TLS")
// appears only when it is likely true: against a real TLS daemon, yes; against a plaintext
// daemon that was SIGKILLed (its port now resetting connections, as a dying daemon's listening
// socket resets those it had queued), no, for a client that had reached it and for a fresh one.
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/socket.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/test_pki.h"

namespace gdr::integ {
namespace {

constexpr char kHint[] = "probably requires TLS";

// Listens on 127.0.0.1:`port` and resets every connection it accepts (SO_LINGER 0, then close).
class ResettingListener {
 public:
  static absl::StatusOr<std::unique_ptr<ResettingListener>> Start(uint16_t port) {
    auto l = std::unique_ptr<ResettingListener>(new ResettingListener());
    uint16_t bound = 0;
    absl::StatusOr<ScopedFd> fd = ListenTcp("127.0.0.1", port, 64, &bound);
    if (!fd.ok()) return fd.status();
    l->fd_ = *std::move(fd);
    l->thread_ = std::thread([p = l.get()] { p->Loop(); });
    return l;
  }
  ~ResettingListener() {
    stop_.store(true);
    thread_.join();
  }
  int resets() const { return resets_.load(); }

 private:
  ResettingListener() = default;
  void Loop() {
    while (!stop_.load()) {
      struct pollfd p {fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      ScopedFd c(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c.valid()) continue;
      const struct linger reset {1, 0};
      ::setsockopt(c.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
      resets_.fetch_add(1);
    }
  }
  ScopedFd fd_;
  std::atomic<bool> stop_{false};
  std::atomic<int> resets_{0};
  std::thread thread_;
};

absl::StatusOr<gdrstore::v1::GetInfoResponse> GetInfo(gdrstore::Client& c) {
  return c.GetInfo(std::chrono::seconds(30));
}

TEST(TlsHintTest, APlaintextClientOfATlsDaemonIsToldTlsIsProbablyNeeded) {
  auto dir = TempDir::Create("gdr-tls-hint");
  ASSERT_TRUE(dir.ok());
  TestPki pki((*dir)->path());
  auto ca = pki.MakeCa("hint");
  ASSERT_TRUE(ca.ok()) << ca.status();
  auto server = pki.Issue(*ca, "server-hint", TestPki::Use::kServer);
  ASSERT_TRUE(server.ok()) << server.status();
  DaemonStart how;
  how.health_check = false;  // the harness's plaintext check cannot handshake
  auto d = DaemonProcess::Start(
      {"--volume", "vol0=4MiB", "--tls-cert", server->cert, "--tls-key", server->key}, how);
  ASSERT_TRUE(d.ok()) << d.status();
  gdrstore::ClientOptions o;
  o.daemon_address = (*d)->address();
  auto c = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto info = GetInfo(**c);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable) << info.status();
  EXPECT_TRUE(absl::StrContains(info.status().message(), kHint)) << info.status();
}

TEST(TlsHintTest, AResetFromAKilledPlaintextDaemonsPortGetsNoTlsHint) {
  auto d = DaemonProcess::Start({"--volume", "vol0=4MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  const uint16_t port = (*d)->port();
  gdrstore::ClientOptions o;
  o.daemon_address = (*d)->address();
  auto reached = gdrstore::Client::Connect(o);
  ASSERT_TRUE(reached.ok()) << reached.status();
  ASSERT_TRUE(GetInfo(**reached).ok());

  ASSERT_TRUE((*d)->Signal(SIGKILL).ok());
  ASSERT_TRUE((*d)->Wait(absl::Seconds(30)).ok());
  auto resetting = ResettingListener::Start(port);
  ASSERT_TRUE(resetting.ok()) << resetting.status();

  auto fresh = gdrstore::Client::Connect(o);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  for (gdrstore::Client* c : {reached->get(), fresh->get()}) {
    // Calls until one fails the way a TLS daemon makes a plaintext call fail (a reset while
    // connecting; an earlier one may still report the refused reconnect of the moment of the
    // kill): none may carry the hint.
    bool reset_seen = false;
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (!reset_seen && absl::Now() < give_up) {
      auto info = GetInfo(*c);
      ASSERT_FALSE(info.ok());
      const std::string m(info.status().message());
      EXPECT_EQ(info.status().code(), absl::StatusCode::kUnavailable) << m;
      EXPECT_FALSE(absl::StrContains(m, kHint)) << m;
      // The words the hint used to be added on, by themselves.
      reset_seen = absl::StrContains(m, "failed to connect") &&
                   (absl::StrContains(m, "Socket closed") ||
                    absl::StrContains(m, "Connection reset") ||
                    absl::StrContains(m, "connection closed") ||
                    absl::StrContains(m, "End of TCP stream"));
      if (reset_seen) std::printf("reset while connecting: %s\n", m.c_str());
      if (!reset_seen) absl::SleepFor(absl::Milliseconds(200));
    }
    EXPECT_TRUE(reset_seen);
  }
  EXPECT_GE((*resetting)->resets(), 2);
}

}  // namespace
}  // namespace gdr::integ
