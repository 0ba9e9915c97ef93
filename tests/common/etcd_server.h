// A real etcd for the tests: /usr/bin/etcd as a child process (the integration suite's process
// harness) on 127.0.0.1 with ports of its own and a scratch data dir. It can be stopped, killed
// and started again on the same ports and data, so tests can take etcd away under a client,
// or serve TLS with client certificates and restart trusting other CAs.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/base/socket.h"
#include "tests/integration/child_process.h"
#include "tests/integration/test_pki.h"

namespace gdr::integ {

// A port on 127.0.0.1 bound but not listening: connections to it are refused for as long as
// it is held, and nobody else is handed it. Release() lets a server take it; Listen() makes it
// a peer that never answers.
class BoundPort {
 public:
  static absl::StatusOr<BoundPort> Reserve();
  uint16_t port() const { return port_; }
  std::string address() const;  // "127.0.0.1:PORT"
  void Release() { fd_.Reset(); }
  // Listens without ever accepting: connections complete the TCP handshake and then hear
  // nothing (a hung server).
  absl::Status Listen();

 private:
  ScopedFd fd_;
  uint16_t port_ = 0;
};

// etcd's client port over TLS, taking only client certificates that chain to `trusted_ca`
// (--client-cert-auth). `server_ca` and `client` are what its readiness check presents, so
// `client` must chain to `trusted_ca`.
struct EtcdTls {
  CertFiles server;        // etcd's own (TestPki::Use::kServer)
  std::string trusted_ca;  // PEM file, one CA or several
  std::string server_ca;   // the CA `server` chains to
  CertFiles client;
};

// One etcd member. Not thread-safe. The destructor kills etcd if it still runs and, when the
// running test has failed, prints etcd's log.
class EtcdServer {
 public:
  static constexpr const char* kBinary = "/usr/bin/etcd";

  // OK when kBinary can be run; FAILED_PRECONDITION naming it and the package to install
  // (callers GTEST_SKIP with the message).
  static absl::Status Available();
  // Picks two free ports, makes the data dir, starts etcd and waits (up to `ready_timeout`)
  // until a Range call answers. The error carries etcd's log when it exits or never answers.
  // With `tls`, clients reach it over TLS only (url() is the same).
  static absl::StatusOr<std::unique_ptr<EtcdServer>> Create(
      absl::Duration ready_timeout = absl::Seconds(30), std::optional<EtcdTls> tls = {});
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  // Starts etcd again on the same ports and data dir and waits until it answers.
  // FAILED_PRECONDITION while it runs.
  absl::Status Start();
  // SIGTERM, then SIGKILL if it has not exited within 10 s; reaps it.
  absl::Status Stop();
  // SIGKILL; reaps it.
  absl::Status Kill();
  bool Running() { return child_ != nullptr && child_->Running(); }
  // What the next Start serves with: a CA rotated while etcd is stopped. Only for an etcd
  // created with TLS.
  void set_tls(EtcdTls tls) { tls_ = std::move(tls); }

  std::string endpoint() const;                     // "127.0.0.1:PORT"
  std::string url(absl::string_view prefix) const;  // "etcd://127.0.0.1:PORT/prefix"
  // Every run's log so far, oldest first.
  std::string Log() const;

 private:
  EtcdServer(std::unique_ptr<TempDir> dir, uint16_t client_port, uint16_t peer_port,
             absl::Duration ready_timeout, std::optional<EtcdTls> tls)
      : dir_(std::move(dir)),
        client_port_(client_port),
        peer_port_(peer_port),
        ready_timeout_(ready_timeout),
        tls_(std::move(tls)) {}
  absl::Status WaitReady();
  absl::Status End(int signal, absl::Duration grace);

  std::unique_ptr<TempDir> dir_;
  uint16_t client_port_;
  uint16_t peer_port_;
  absl::Duration ready_timeout_;
  std::optional<EtcdTls> tls_;
  int runs_ = 0;  // etcd-<run>.log per start
  std::unique_ptr<ChildProcess> child_;
};

}  // namespace gdr::integ
