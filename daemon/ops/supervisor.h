// The daemon's life after it is serving: tells systemd it is ready, runs the watchdog monitor,
// takes SIGHUP (reload) and SIGTERM/SIGINT (drain and stop) on the main thread, and flushes
// file-backed volumes on the way out.
#pragma once

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <functional>
#include <string>
#include <vector>

#include "daemon/ops/daemon_config.h"
#include "daemon/store/delay_queue.h"
#include "daemon/transport/initiator.h"
#include "daemon/store/media_timing.h"
#include "daemon/service/stats.h"
#include "daemon/store/store.h"
#include "daemon/service/store_service.h"
#include "daemon/store/sync_worker.h"
#include "daemon/ops/systemd_notifier.h"

namespace gdr {

struct SupervisedDaemon {
  int argc = 0;
  char** argv = nullptr;  // re-parsed on SIGHUP (the config file is read again)
  DaemonConfig config;
  grpc::Server* server = nullptr;
  StoreService* service = nullptr;
  const Store* store = nullptr;
  std::vector<Initiator*> initiators;      // shut down at the drain deadline
  std::vector<Initiator*> health_checked;  // CheckHealth()ed by the watchdog monitor
  // Run when the drain starts, after the service stops admitting ops (e.g. rc refuses new
  // Connect calls).
  std::vector<std::function<void()>> start_drain;
  // More watchdog probes (name, check), e.g. a verbs completion poller.
  std::vector<std::pair<std::string, std::function<absl::Status()>>> probes;
  DelayQueue* delays = nullptr;
  SyncWorker* syncer = nullptr;
  MediaTiming* media = nullptr;
  DaemonStats* stats = nullptr;
  const SystemdNotifier* notifier = nullptr;
  // Clients with live transport connections (tcp destinations, rc connections...).
  std::function<uint32_t()> clients;
  // "serving on 127.0.0.1:50051, transports tcp": the first words of every STATUS line.
  std::string serving;
};

// The STATUS= line: clients, in-flight ops and bytes moved.
std::string StatusLine(const SupervisedDaemon& d);

// Sends READY=1, runs the health monitor and the signal loop until SIGTERM/SIGINT, drains
// within the configured deadline, and returns the process exit code (0 after a clean drain).
// `signals` must be blocked in every thread (sigwait takes them here).
int ServeUntilStopped(SupervisedDaemon& d, const sigset_t& signals);

}  // namespace gdr
