// gdrstored entry point: parse settings, build the store, the rails (RDMA devices) and the
// transports (one TransportSet), the gRPC service and server, then hand over to the supervisor
// (systemd notify/watchdog, SIGHUP reload, SIGTERM drain) until it returns the exit code.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/base/units.h"
#include "daemon/ops/cluster_member.h"
#include "daemon/ops/daemon_config.h"
#include "daemon/ops/metrics_exporter.h"
#include "daemon/ops/supervisor.h"
#include "daemon/ops/systemd_notifier.h"
#include "daemon/ops/tls_reloader.h"
#include "daemon/service/admin_service.h"
#include "daemon/service/fault_injector.h"
#include "daemon/service/stats.h"
#include "daemon/service/store_service.h"
#include "daemon/store/delay_queue.h"
#include "daemon/store/media_timing.h"
#include "daemon/store/store.h"
#include "daemon/store/sync_worker.h"
#include "daemon/transport/dc/dc_transport.h"
#include "daemon/transport/rc/rc_connect_service.h"
#include "daemon/transport/rc/rc_initiator.h"
#include "daemon/transport/tcp/tcp_initiator.h"
#include "daemon/transport/transport_set.h"
#include "daemon/verbs_core/rail_set.h"

namespace {

int Fatal(const absl::Status& status) {
  std::fprintf(stderr, "gdrstored: %s\n", std::string(status.message()).c_str());
  return 1;
}

// Write-then-rename so a reader never sees a partial number.
void WritePortFile(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    GDR_LOG(kError) << "cannot write port file " << path;
  }
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

  const absl::Time t0 = absl::Now();
  absl::StatusOr<std::unique_ptr<gdr::Store>> store = gdr::Store::Create(cfg->volumes);
  if (!store.ok()) return Fatal(store.status());
  for (const auto& [name, v] : (*store)->volumes()) {
    GDR_LOG(kInfo) << "volume " << name << ": " << gdr::FormatSize(v->size())
                   << (v->file().empty() ? std::string(" (memory)")
                                         : absl::StrCat(" (file ", v->file(),
                                                        v->created() ? ", created and filled)"
                                                                     : ", existing data kept)"));
  }
  std::vector<std::string> volume_names;
  std::map<std::string, gdr::MediaSettings> media_settings;
  for (const gdr::VolumeSpec& v : cfg->volumes) {
    volume_names.push_back(v.name);
    media_settings[v.name] = v.media;
    if (v.media.enabled()) {
      GDR_LOG(kInfo) << "volume " << v.name << ": simulated device "
                     << gdr::FormatMediaSettings(v.media);
    }
  }
  gdr::DaemonStats stats(volume_names);
  gdr::MediaTiming media(media_settings);
  gdr::DelayQueue delays;
  gdr::SyncWorker syncer;
  GDR_LOG(kInfo) << "store ready in " << absl::FormatDuration(absl::Now() - t0);

  // The transports, built once here and from then on seen only through the TransportSet.
  // The rails are declared first so that they outlive every transport that runs on them.
  std::unique_ptr<gdr::RailSet> rails;
  std::string core_detail = "no transport asked for an RDMA device (--rc off, --dc off)";
  if (cfg->WantsRdmaDevice()) {
    absl::StatusOr<std::unique_ptr<gdr::RailSet>> opened =
        gdr::RailSet::Open(cfg->verbs, **store);
    if (opened.ok()) {
      rails = std::move(*opened);
    } else if (cfg->dc.mode == gdr::dc::DcTransportConfig::Mode::kOn &&
               cfg->rc_mode != gdr::DaemonConfig::RcMode::kOn) {
      return Fatal(absl::Status(opened.status().code(),
                                absl::StrCat("transport dc needs an RDMA device, and none opens: ",
                                             opened.status().message())));
    } else if (cfg->NeedsRdmaDevice()) {
      return Fatal(opened.status());
    } else {
      core_detail = std::string(opened.status().message());
    }
  }
  gdr::TransportSet transports;
  {
    absl::StatusOr<std::unique_ptr<gdr::TcpInitiator>> tcp = gdr::TcpInitiator::Create(cfg->tcp);
    if (!tcp.ok()) return Fatal(tcp.status());
    transports.Add(std::move(*tcp));
  }
  std::unique_ptr<gdr::RcConnectService> rc_connect;
  if (cfg->rc_mode == gdr::DaemonConfig::RcMode::kOff) {
    transports.SetAbsent(gdr::TransportKind::kRc, "disabled by configuration (--rc off)");
  } else if (rails == nullptr) {
    transports.SetAbsent(gdr::TransportKind::kRc, core_detail);
  } else {
    absl::StatusOr<std::unique_ptr<gdr::RcInitiator>> rc =
        gdr::RcInitiator::Create(cfg->rc, rails.get());
    if (!rc.ok()) return Fatal(rc.status());
    rc_connect = std::make_unique<gdr::RcConnectService>(rc->get());
    transports.Add(std::move(*rc));
  }
  // dc runs on the first rail only: its DCIs and the address handles they cache are per device.
  absl::StatusOr<gdr::dc::DcStart> dc =
      gdr::dc::StartDcTransport(cfg->dc, rails ? rails->first() : nullptr, core_detail,
                                cfg->limits.max_op_bytes, cfg->rc.chunk_bytes);
  if (!dc.ok()) return Fatal(dc.status());
  if (dc->initiator) {
    transports.Add(std::move(dc->initiator));
  } else {
    transports.SetAbsent(gdr::TransportKind::kDc, dc->detail);
  }
  // Devices no transport runs on are closed again: GetInfo shows a device only where one works.
  if (rails != nullptr && transports.Find(gdr::TransportKind::kRc) == nullptr &&
      transports.Find(gdr::TransportKind::kDc) == nullptr) {
    rails.reset();
  }
  transports.set_rails(rails.get());
  for (gdr::TransportKind k : gdr::kTransportKinds) {
    GDR_LOG(kInfo) << gdr::TransportName(k)
                   << (transports.Find(k) != nullptr ? ": " : " not offered: ")
                   << transports.Describe(k);
  }
  GDR_LOG(kInfo) << "transports: " << transports.Names();

  // Fault injection: the configured rules now, more (and clears) through the Admin service.
  gdr::FaultInjector faults(cfg->faults.seed);
  if (rails != nullptr) {
    faults.set_rail_down([&rails](const std::string& rail, absl::Duration d) {
      return rails->ForceDown(rail, d);
    });
  }
  for (const gdrstore::v1::FaultSpec& spec : cfg->faults.specs) {
    if (absl::Status s = faults.Add(spec, "config").status(); !s.ok()) {
      return Fatal(absl::Status(s.code(), absl::StrCat("--fault: ", s.message())));
    }
  }

  // Declared before the service so that it outlives every op that records into it.
  std::unique_ptr<gdr::TraceRecorder> trace;
  if (!cfg->trace.empty()) {
    absl::StatusOr<std::unique_ptr<gdr::TraceRecorder>> r =
        gdr::TraceRecorder::Create(cfg->trace, cfg->trace_max_bytes);
    if (!r.ok()) return Fatal(r.status());
    trace = std::move(*r);
    GDR_LOG(kInfo) << "recording ops to trace " << cfg->trace << " (up to "
                   << gdr::FormatSize(cfg->trace_max_bytes) << ")";
  }
  gdr::ServiceExtras extras;
  extras.trace = trace.get();
  extras.stats = &stats;
  extras.faults = &faults;
  extras.media = &media;
  extras.delays = &delays;
  extras.syncer = &syncer;
  gdr::StoreService service(store->get(), &transports, cfg->limits, extras);
  service.set_connect_handler(rc_connect.get());
  gdr::AdminService admin(&service, &faults);
  // san: lines of the token file name client certificates, so they count only when gRPC has
  // verified those against --tls-client-ca (mTLS; switching it needs a restart).
  service.TrustClientCertificates(cfg->tls.enabled() && cfg->tls.mutual());
  service.SetTokens(cfg->tokens);
  if (!cfg->tokens.empty()) {
    GDR_LOG(kInfo) << "token authentication on: " << gdr::DescribeCredentials(cfg->tokens)
                   << " accepted from " << cfg->token_file;
    struct stat st {};
    if (::stat(cfg->token_file.c_str(), &st) == 0 && (st.st_mode & 0077) != 0) {
      GDR_LOG(kWarning) << "token file " << cfg->token_file
                        << " is readable by group or others (mode "
                        << absl::StrFormat("%04o", st.st_mode & 07777) << "); chmod 600 it";
    }
  }

  // Declared before the server so that the certificates outlive every handshake.
  std::unique_ptr<gdr::TlsReloader> tls;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (cfg->tls.enabled()) {
    absl::StatusOr<std::unique_ptr<gdr::TlsReloader>> reloader = gdr::TlsReloader::Create(cfg->tls);
    if (!reloader.ok()) return Fatal(reloader.status());
    tls = std::move(*reloader);
    credentials = tls->credentials();
    service.set_tls_info([&tls] { return tls->Info(); });
    tls->StartWatching(absl::Seconds(1));
    GDR_LOG(kInfo) << tls->Describe() << "; files re-read when they change and on SIGHUP";
  } else if (!gdr::IsLoopbackListen(cfg->listen) && cfg->token_file.empty()) {
    GDR_LOG(kWarning) << "--insecure: serving " << cfg->listen
                      << " with neither TLS nor tokens; anyone who reaches it may read and "
                         "write every volume";
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(cfg->listen, credentials, &port);
  builder.RegisterService(&service);
  builder.RegisterService(&admin);
  builder.SetMaxReceiveMessageSize(1 << 20);  // control messages only; data never rides gRPC
  // A client host that vanishes without closing its connection is noticed by keepalive, which
  // ends its Connect call and so frees its RC QPs.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 20000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    return Fatal(absl::UnavailableError(
        absl::StrCat("cannot listen on ", cfg->listen, " (address in use or not local?)")));
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  GDR_LOG(kInfo) << "gdrstored " << GDR_VERSION << " serving gdrstore.v1 on " << cfg->listen
                 << " (port " << port << "), transports: " << transports.Names();
  // After the gRPC server, whose port file tells a test the daemon is up: by then the metrics
  // port file is there too.
  std::unique_ptr<gdr::MetricsExporter> metrics;
  if (!cfg->metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<gdr::MetricsExporter>> started =
        gdr::MetricsExporter::Start(cfg->metrics_listen, &service, &stats);
    if (!started.ok()) return Fatal(started.status());
    metrics = std::move(*started);
    GDR_LOG(kInfo) << "Prometheus metrics on http://" << cfg->metrics_listen << "/metrics (port "
                   << metrics->port() << ")";
    if (!cfg->metrics_port_file.empty()) WritePortFile(cfg->metrics_port_file, metrics->port());
  }
  if (!cfg->port_file.empty()) WritePortFile(cfg->port_file, port);

  // Registered once serving, so a client that reads the entry finds the port open.
  std::unique_ptr<gdr::ClusterMember> member;
  if (cfg->cluster.enabled()) {
    absl::StatusOr<std::string> address =
        gdr::AdvertiseAddress(cfg->cluster.advertise, cfg->listen, port);
    if (!address.ok()) return Fatal(address.status());
    gdrstore::v1::ClusterMember entry;
    entry.set_id(cfg->cluster.id.empty() ? gdr::DefaultMemberId(port) : cfg->cluster.id);
    entry.set_address(*address);
    for (gdr::TransportKind k : gdr::kTransportKinds) {
      if (transports.Find(k) != nullptr) entry.add_transports(gdr::TransportName(k));
    }
    for (size_t i = 0; rails != nullptr && i < rails->size(); ++i) {
      entry.add_rails(rails->rail(i)->name());
    }
    for (const auto& [name, v] : (*store)->volumes()) {
      auto* vol = entry.add_volumes();
      vol->set_name(name);
      vol->set_size(v->size());
    }
    entry.set_version(GDR_VERSION);
    entry.set_registered_unix_ms(absl::ToUnixMillis(absl::Now()));
    absl::StatusOr<std::unique_ptr<gdr::ClusterMember>> started = gdr::ClusterMember::Start(
        cfg->cluster.url, absl::Seconds(cfg->cluster.ttl_s), std::move(entry));
    if (!started.ok()) return Fatal(started.status());
    member = std::move(*started);
  }

  auto notifier = gdr::SystemdNotifier::FromEnvironment();
  gdr::SupervisedDaemon d;
  d.argc = argc;
  d.argv = argv;
  d.config = *cfg;
  d.server = server.get();
  d.service = &service;
  d.store = store->get();
  d.transports = &transports;
  d.delays = &delays;
  d.syncer = &syncer;
  d.media = &media;
  d.faults = &faults;
  d.stats = &stats;
  d.notifier = notifier.get();
  d.tls = tls.get();
  d.trace = trace.get();
  d.serving = absl::StrCat("serving on ", cfg->listen, " (port ", port, "), transports ",
                           transports.Names());
  const int code = gdr::ServeUntilStopped(d, signals);
  if (member) member->Stop();  // the entry goes now, not a TTL later
  if (trace) {
    trace->Close();  // every op answered by now is in the file
    const gdr::TraceRecorder::Stats t = trace->stats();
    GDR_LOG(kInfo) << "trace " << t.file << ": " << t.records << " ops recorded, " << t.dropped
                   << " dropped";
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with Mutex deadlock detection, which records every lock in a
  // global graph: worth having in the tests, measurable per op on the data path.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return Run(argc, argv);
}
