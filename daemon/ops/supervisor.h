// The daemon's life after it is serving: tells systemd it is ready, runs the watchdog monitor,
// takes SIGHUP (reload) and SIGTERM/SIGINT (drain and stop) on the main thread, and flushes
// file-backed volumes on the way out.
#pragma once

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <functional>
#include <string>
#include <vector>

#include "common/process/systemd_notifier.h"
#include "daemon/observe/stats.h"
#include "daemon/observe/trace_recorder.h"
#include "daemon/ops/daemon_config.h"
#include "daemon/ops/tls_reloader.h"
#include "daemon/service/store_service.h"
#include "daemon/service/volume_catalog.h"
#include "daemon/sim/delay_queue.h"
#include "daemon/sim/fault_injector.h"
#include "daemon/sim/media_timing.h"
#include "daemon/store/store.h"
#include "daemon/store/sync_worker.h"
#include "daemon/transport/transport_set.h"

namespace gdr {

struct SupervisedDaemon {
  int argc = 0;
  char** argv = nullptr;  // re-parsed on SIGHUP (the config file is read again)
  DaemonConfig config;
  grpc::Server* server = nullptr;
  StoreService* service = nullptr;
  const Store* store = nullptr;
  // Health-checked by the watchdog, drained and shut down with the daemon; the client count.
  TransportSet* transports = nullptr;
  DelayQueue* delays = nullptr;
  SyncWorker* syncer = nullptr;
  MediaTiming* media = nullptr;
  FaultInjector* faults = nullptr;  // its configured rules follow the config on SIGHUP
  DaemonStats* stats = nullptr;
  // Makes and deletes the volumes a reload adds to or removes from the configuration; null: a
  // reload reports those as needing a restart.
  VolumeCatalog* volumes = nullptr;
  const SystemdNotifier* notifier = nullptr;
  TlsReloader* tls = nullptr;  // the gRPC port's certificates; null without TLS
  TraceRecorder* trace = nullptr;  // --trace, reopened on SIGHUP; null without
  // "serving on 127.0.0.1:50051, transports tcp": the first words of every STATUS line.
  std::string serving;
};

// The STATUS= line: clients, in-flight ops and bytes moved.
std::string StatusLine(const SupervisedDaemon& d);

// Sends READY=1, runs the health monitor and the signal loop until SIGTERM/SIGINT, drains
// within the configured deadline, and returns the process exit code (0 after a clean drain).
// `signals` must be blocked in every thread (sigwait takes them here).
int ServeUntilStopped(SupervisedDaemon& d, const sigset_t& signals);
// The stop after the signal: refuses new ops, lets those in flight finish until the drain
// deadline (cancelling the rest), stops the server and the threads behind the ops, and flushes
// file-backed volumes. Returns the exit code. Once.
int Drain(SupervisedDaemon& d);

}  // namespace gdr
