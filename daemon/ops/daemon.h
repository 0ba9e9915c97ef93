// gdrstored as one object: owns every part of a running daemon (store, rails, transports, the
// simulation and observation parts and the op pipeline over them, the gRPC service and server,
// TLS, the metrics endpoint, the cluster entry, the supervisor's view) and their start and stop
// order. main.cc parses the flags and runs one; tests may run one in-process.
#pragma once

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/process/systemd_notifier.h"
#include "daemon/observe/metrics_exporter.h"
#include "daemon/observe/stats.h"
#include "daemon/observe/trace_recorder.h"
#include "daemon/ops/cluster_member.h"
#include "daemon/ops/daemon_config.h"
#include "daemon/ops/supervisor.h"
#include "daemon/ops/tls_reloader.h"
#include "daemon/service/admin_service.h"
#include "daemon/service/op_stages.h"
#include "daemon/service/store_service.h"
#include "daemon/sim/delay_queue.h"
#include "daemon/sim/fault_injector.h"
#include "daemon/sim/media_timing.h"
#include "daemon/store/store.h"
#include "daemon/store/sync_worker.h"
#include "daemon/transport/connect_handler.h"
#include "daemon/transport/transport_set.h"
#include "daemon/verbs_core/rail_set.h"

namespace gdr {

class Daemon {
 public:
  // Builds every part from `config` and starts serving: the gRPC port is bound (and the port
  // files written) when it returns, the cluster entry on its way. `argc`/`argv` are parsed
  // again on SIGHUP (the config file is read again); none: reloads keep `config`. Errors are
  // the daemon's start-up failures (a volume that cannot be made, a device a transport needs,
  // a port that cannot be bound, a bad --fault), each naming what failed.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(DaemonConfig config, int argc = 0,
                                                       char** argv = nullptr);
  ~Daemon();  // Stop(), then the parts go in the reverse of the order they were made
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The supervisor's loop (systemd ready and watchdog, SIGHUP reload, SIGTERM/SIGINT drain)
  // until a signal stops it, then the stop; returns the exit code. `signals` must be blocked in
  // every thread (they are taken with sigwait).
  int ServeUntilSignalled(const sigset_t& signals);
  // Drains and stops as SIGTERM does, without signals (tests). Idempotent; returns the exit
  // code of the first stop.
  int Stop();

  int port() const { return port_; }
  StoreService& service() { return *service_; }

 private:
  explicit Daemon(DaemonConfig config) : config_(std::move(config)) {}
  absl::Status MakeStore();
  // The rails, the transports on them and rc's Connect service (daemon_transports.cc).
  absl::Status MakeTransports();
  absl::Status MakeSimulation();
  // The op pipeline and the services it runs under.
  absl::Status MakeService();
  absl::Status Serve();
  absl::Status JoinCluster();
  // The cluster entry from what the daemon serves now (its volumes included): built at join
  // and again on each volume made or deleted (VolumesChanged), never elsewhere.
  gdrstore::v1::ClusterMember MemberEntry() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(member_mu_);
  // The catalog's hook (its thread): the cluster entry follows the volumes.
  void VolumesChanged();
  // What follows the supervisor's stop: the cluster entry goes, the trace is closed.
  int Stopped(int code);

  DaemonConfig config_;
  int argc_ = 0;
  char** argv_ = nullptr;
  // Declared in the order they are made; each outlives what is declared after it.
  std::unique_ptr<Store> store_;
  std::unique_ptr<DaemonStats> stats_;
  std::unique_ptr<MediaTiming> media_;
  std::unique_ptr<DelayQueue> delays_;
  std::unique_ptr<SyncWorker> syncer_;
  // The rails before the transports that run on them.
  std::unique_ptr<RailSet> rails_;
  std::unique_ptr<TransportSet> transports_;
  std::unique_ptr<ConnectHandler> rc_connect_;
  std::unique_ptr<FaultInjector> faults_;
  // Before the service so that it outlives every op that records into it.
  std::unique_ptr<TraceRecorder> trace_;
  std::vector<std::unique_ptr<OpStage>> stages_;
  std::unique_ptr<StoreService> service_;
  // Before the catalog, whose thread updates it; made once serving (JoinCluster). The lock
  // orders that against a volume made meanwhile: the later of the two reads the store.
  absl::Mutex member_mu_;
  std::unique_ptr<ClusterMember> member_ ABSL_GUARDED_BY(member_mu_);
  std::string member_address_ ABSL_GUARDED_BY(member_mu_);  // the entry's address
  std::unique_ptr<VolumeCatalog> volumes_;
  std::unique_ptr<AdminService> admin_;
  // Before the server so that the certificates outlive every handshake.
  std::unique_ptr<TlsReloader> tls_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::unique_ptr<MetricsExporter> metrics_;
  std::unique_ptr<SystemdNotifier> notifier_;
  SupervisedDaemon supervised_;
  bool stopped_ = false;
  int exit_code_ = 0;
};

}  // namespace gdr
