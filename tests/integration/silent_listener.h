// Test-owned loopback sockets that misbehave on purpose: a listener that accepts, proves it
// holds its endpoint secret and then never answers (a hung client target), and a raw
// connection for sending garbage or half frames.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/socket.h"

namespace gdr::integ {

// Listens on 127.0.0.1 (ephemeral port), accepts every connection on its own thread, answers
// the daemon's proof for secret() (so the daemon takes it for the caller's target) and then
// never reads or writes. Thread-safe. The destructor closes everything and joins the thread.
class SilentListener {
 public:
  static absl::StatusOr<std::unique_ptr<SilentListener>> Start();
  ~SilentListener();
  uint16_t port() const { return port_; }
  // What a request's TcpEndpoint.secret must carry to reach this listener.
  const std::string& secret() const { return secret_; }
  // True once at least `n` connections were accepted, false after `timeout`.
  bool WaitForConnections(size_t n, absl::Duration timeout);
  // Closes the accepted connections (their peers see EOF). Later ones are still accepted.
  void CloseConnections();

 private:
  SilentListener() = default;
  void AcceptLoop();
  ScopedFd listen_fd_;
  uint16_t port_ = 0;
  std::string secret_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ScopedFd> accepted_ ABSL_GUARDED_BY(mu_);
  size_t accepted_total_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

// A loopback port that refuses connections: bound (so nobody else gets it) but not listening.
class ClosedPort {
 public:
  static absl::StatusOr<std::unique_ptr<ClosedPort>> Reserve();
  uint16_t port() const { return port_; }

 private:
  ClosedPort() = default;
  ScopedFd fd_;
  uint16_t port_ = 0;
};

// Connects to 127.0.0.1:port, sends `bytes`, optionally half-closes the write side, then waits
// up to `timeout` for the peer to close the connection. Returns true when it did (EOF or
// reset), false when it was still open at the deadline. With `secret`, the peer is a tcp target
// and has to prove it first (as to the daemon), so `bytes` reach an opened link.
absl::StatusOr<bool> SendAndAwaitPeerClose(uint16_t port, const std::string& bytes,
                                           bool shutdown_write, absl::Duration timeout,
                                           const std::string& secret = "");

}  // namespace gdr::integ
