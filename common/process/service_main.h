// The entry point gdrstored and gdragent share: signals taken by the main thread alone, the
// settings parsed (--help and --version printed), the log tagged, the service started and
// served until it returns the process's exit code.
#pragma once

#include <openssl/crypto.h>
#include <signal.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/base/log.h"

namespace gdr {

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread, so in every thread it starts later
// (no handler ever runs inside gRPC or a transport's threads: the main thread takes them with
// sigwait), and ignores SIGPIPE. Returns the blocked set. Call before any thread starts.
inline sigset_t BlockServiceSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

// The whole of a service's main(). `parse(argc, argv)` returns absl::StatusOr<Config>, where
// CANCELLED carries the --help or --version text (printed, exit 0) and any other error is
// printed as "NAME: why" (exit 1); Config has a log_level. `start(Config)` returns an
// absl::StatusOr<std::unique_ptr<S>>, S having int ServeUntilSignalled(const sigset_t&).
template <class Parse, class Start>
int RunService(const char* name, int argc, char** argv, Parse parse, Start start) {
  // Debian's Abseil is built with Mutex deadlock detection, which records every lock in a
  // global graph: worth having in the tests, measurable per op on the data path.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // OpenSSL's own exit handler frees its per-thread state keys while gRPC's detached event
  // engine threads (which run TLS handshakes: etcd, upstream daemons) may still be ending:
  // their per-thread error queues and random contexts are then never freed (LeakSanitizer
  // reported 984 bytes in 3 such objects once in CI; grpc/grpc#38539). Without the handler,
  // what is left at exit stays reachable from OpenSSL's globals, as any process's memory is
  // given back at exit. First OpenSSL call of the process, so the option takes.
  OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);
  const sigset_t signals = BlockServiceSignals();
  auto fatal = [name](const absl::Status& status) {
    std::fprintf(stderr, "%s: %s\n", name, std::string(status.message()).c_str());
    return 1;
  };
  auto config = parse(argc, argv);
  if (!config.ok()) {
    if (absl::IsCancelled(config.status())) {
      std::cout << config.status().message();
      return 0;
    }
    return fatal(config.status());
  }
  SetLogTag(name);
  SetLogLevel(config->log_level);
  auto service = start(*std::move(config));
  if (!service.ok()) return fatal(service.status());
  return (*service)->ServeUntilSignalled(signals);
}

}  // namespace gdr
