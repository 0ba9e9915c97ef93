// gdragent entry point: parses the settings and runs the Agent (agent/agent.h), which connects
// to the storage daemon, listens on the Unix socket and serves until SIGTERM.
#include <signal.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "absl/synchronization/mutex.h"
#include "agent/agent.h"
#include "agent/agent_config.h"
#include "common/base/log.h"

namespace {

int Fatal(const absl::Status& status) {
  std::fprintf(stderr, "gdragent: %s\n", std::string(status.message()).c_str());
  return 1;
}

int Run(int argc, char** argv) {
  // Signals are taken synchronously by the main thread; every thread created later inherits
  // the mask, so no handler ever runs inside gRPC or the handoff server's threads.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<gdr::agent::AgentConfig> cfg = gdr::agent::ParseAgentConfig(argc, argv);
  if (!cfg.ok()) {
    if (absl::IsCancelled(cfg.status())) {
      std::cout << cfg.status().message();
      return 0;
    }
    return Fatal(cfg.status());
  }
  gdr::SetLogTag("gdragent");
  gdr::SetLogLevel(cfg->log_level);
  absl::StatusOr<std::unique_ptr<gdr::agent::Agent>> agent =
      gdr::agent::Agent::Start(*std::move(cfg));
  if (!agent.ok()) return Fatal(agent.status());
  return (*agent)->ServeUntilSignalled(signals);
}

}  // namespace

int main(int argc, char** argv) {
  // As gdrstored: Abseil's Mutex deadlock detection costs per op on the data path.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return Run(argc, argv);
}
