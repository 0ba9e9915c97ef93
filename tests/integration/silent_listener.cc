#include "tests/integration/silent_listener.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/wire/tcp_proof.h"

namespace gdr::integ {

absl::StatusOr<std::unique_ptr<SilentListener>> SilentListener::Start() {
  std::unique_ptr<SilentListener> l(new SilentListener());
  absl::StatusOr<ScopedFd> fd = ListenTcp("127.0.0.1", 0, 64, &l->port_);
  if (!fd.ok()) return fd.status();
  l->listen_fd_ = std::move(*fd);
  absl::StatusOr<std::string> secret = tcpwire::NewSecret();
  if (!secret.ok()) return secret.status();
  l->secret_ = *std::move(secret);
  l->thread_ = std::thread([raw = l.get()] { raw->AcceptLoop(); });
  return l;
}

SilentListener::~SilentListener() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  ::shutdown(listen_fd_.get(), SHUT_RDWR);  // wakes accept()
  if (thread_.joinable()) thread_.join();
}

void SilentListener::AcceptLoop() {
  for (;;) {
    const int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    // A daemon that gives up mid-opening leaves a dead connection: held all the same.
    if (fd >= 0) (void)tcpwire::AnswerChallenge(fd, secret_, absl::Now() + absl::Seconds(30));
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    accepted_.emplace_back(fd);
    ++accepted_total_;
  }
}

bool SilentListener::WaitForConnections(size_t n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return accepted_total_ >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

void SilentListener::CloseConnections() {
  std::vector<ScopedFd> victims;
  {
    absl::MutexLock lock(&mu_);
    victims.swap(accepted_);
  }
  victims.clear();
}

absl::StatusOr<std::unique_ptr<ClosedPort>> ClosedPort::Reserve() {
  std::unique_ptr<ClosedPort> p(new ClosedPort());
  p->fd_ = ScopedFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!p->fd_.valid()) return absl::ErrnoToStatus(errno, "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  if (::bind(p->fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    return absl::ErrnoToStatus(errno, "bind");
  }
  socklen_t len = sizeof(a);
  if (::getsockname(p->fd_.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return absl::ErrnoToStatus(errno, "getsockname");
  }
  p->port_ = ntohs(a.sin_port);
  return p;
}

absl::StatusOr<bool> SendAndAwaitPeerClose(uint16_t port, const std::string& bytes,
                                           bool shutdown_write, absl::Duration timeout,
                                           const std::string& secret) {
  absl::StatusOr<ScopedFd> fd = ConnectTcp("127.0.0.1", port, absl::Seconds(5));
  if (!fd.ok()) return fd.status();
  if (!secret.empty()) {
    absl::Status s = tcpwire::ProveTarget(fd->get(), secret, absl::Now() + timeout, "target");
    if (!s.ok()) return s;
  }
  if (!bytes.empty()) {
    if (absl::Status s = WriteFull(fd->get(), bytes.data(), bytes.size()); !s.ok()) {
      // The peer may already have dropped us mid-send: that is a close too.
      return true;
    }
  }
  if (shutdown_write) ::shutdown(fd->get(), SHUT_WR);
  const absl::Time deadline = absl::Now() + timeout;
  char buf[4096];
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    struct pollfd p = {fd->get(), POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    const ssize_t n = ::recv(fd->get(), buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return true;  // ECONNRESET and friends
    }
    // Whatever the peer says back (e.g. an HTTP/2 GOAWAY) is drained; we wait for the close.
  }
}

}  // namespace gdr::integ
