// gdrstored entry point: parses the settings (flags and config file) and runs the Daemon
// (daemon/ops/daemon.h), which builds every layer, serves, and hands over to the supervisor
// (systemd notify/watchdog, SIGHUP reload, SIGTERM drain) until it returns the exit code.
#include <signal.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/base/log.h"
#include "daemon/ops/daemon.h"
#include "daemon/ops/daemon_config.h"

namespace {

int Fatal(const absl::Status& status) {
  std::fprintf(stderr, "gdrstored: %s\n", std::string(status.message()).c_str());
  return 1;
}

int Run(int argc, char** argv) {
  // Signals are taken synchronously by the main thread; every thread created later inherits
  // the mask, so no handler ever runs inside gRPC or a transport thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<gdr::DaemonConfig> cfg = gdr::ParseDaemonConfig(argc, argv);
  if (!cfg.ok()) {
    if (absl::IsCancelled(cfg.status())) {
      std::cout << cfg.status().message();
      return 0;
    }
    return Fatal(cfg.status());
  }
  gdr::SetLogTag("gdrstored");
  gdr::SetLogLevel(cfg->log_level);
  absl::StatusOr<std::unique_ptr<gdr::Daemon>> daemon =
      gdr::Daemon::Start(*std::move(cfg), argc, argv);
  if (!daemon.ok()) return Fatal(daemon.status());
  return (*daemon)->ServeUntilSignalled(signals);
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with Mutex deadlock detection, which records every lock in a
  // global graph: worth having in the tests, measurable per op on the data path.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return Run(argc, argv);
}
