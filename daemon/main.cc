// gdrstored entry point: parse settings, build the store, the tcp initiator pool and the gRPC
// server, then hand over to the supervisor (systemd notify/watchdog, SIGHUP reload, SIGTERM
// drain) until it returns the exit code.
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
#include "common/log.h"
#include "common/units.h"
#include "daemon/ops/daemon_config.h"
#include "daemon/transport/dc/dc_transport.h"
#include "daemon/store/delay_queue.h"
#include "daemon/store/media_timing.h"
#include "daemon/service/stats.h"
#include "daemon/store/store.h"
#include "daemon/service/store_service.h"
#include "daemon/transport/rc/rc_initiator.h"
#include "daemon/ops/supervisor.h"
#include "daemon/store/sync_worker.h"
#include "daemon/ops/systemd_notifier.h"
#include "daemon/transport/tcp/tcp_initiator.h"
#include "daemon/transport/transport_router.h"

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
    media_settings[v.name] = {v.latency_us, v.bandwidth};
    if (v.latency_us != 0 || v.bandwidth != 0) {
      GDR_LOG(kInfo) << "volume " << v.name << ": simulated media latency " << v.latency_us
                     << " us, bandwidth "
                     << (v.bandwidth ? gdr::FormatSize(v.bandwidth) + "/s" : "unlimited");
    }
  }
  gdr::DaemonStats stats(volume_names);
  gdr::MediaTiming media(media_settings);
  gdr::DelayQueue delays;
  gdr::SyncWorker syncer;
  GDR_LOG(kInfo) << "store ready in " << absl::FormatDuration(absl::Now() - t0);

  absl::StatusOr<std::unique_ptr<gdr::TcpInitiator>> tcp = gdr::TcpInitiator::Create(cfg->tcp);
  if (!tcp.ok()) return Fatal(tcp.status());

  // rc: an RDMA device, opened once; its absence is fatal only when one was asked for.
  std::unique_ptr<gdr::RcInitiator> rc;
  std::string rc_detail = "disabled by configuration (--rc off)";
  if (cfg->rc_mode != gdr::DaemonConfig::RcMode::kOff) {
    absl::StatusOr<std::unique_ptr<gdr::RcInitiator>> made =
        gdr::RcInitiator::Create(cfg->rc, **store);
    if (made.ok()) {
      rc = std::move(*made);
    } else if (cfg->rc_mode == gdr::DaemonConfig::RcMode::kOn) {
      return Fatal(made.status());
    } else {
      rc_detail = std::string(made.status().message());
      GDR_LOG(kInfo) << "rc transport not offered: " << rc_detail;
    }
  }

  // dc: a DCI pool on rc's device, offered only where the device is mlx5 and can do DC.
  // Declared after rc so that it is destroyed first (it uses rc's poller and MRs).
  absl::StatusOr<gdr::dc::DcStart> dc = gdr::dc::StartDcTransport(
      cfg->dc, rc.get(), rc_detail, cfg->limits.max_op_bytes, cfg->rc.chunk_bytes);
  if (!dc.ok()) return Fatal(dc.status());
  if (dc->initiator) {
    GDR_LOG(kInfo) << "dc: " << dc->detail;
  } else {
    GDR_LOG(kInfo) << "dc transport not offered: " << dc->detail;
  }

  gdr::OfferedTransports offered;
  offered.rc = rc != nullptr;
  offered.dc = dc->initiator != nullptr;
  gdr::TransportRouter router(tcp->get(), rc.get(), dc->initiator.get());
  gdr::ServiceExtras extras;
  extras.stats = &stats;
  extras.media = &media;
  extras.delays = &delays;
  extras.syncer = &syncer;
  gdr::TcpInitiator* tcp_initiator = tcp->get();
  gdr::RcInitiator* rc_initiator = rc.get();
  const uint32_t tcp_capacity = cfg->tcp.max_links;
  const uint32_t rc_capacity = cfg->rc.max_qps;
  extras.pool_stats = [tcp_initiator, tcp_capacity, rc_initiator, rc_capacity](
                          gdrstore::v1::Transport t, gdrstore::v1::PoolStats* pool) {
    if (t == gdrstore::v1::TRANSPORT_TCP) {
      const gdr::TcpInitiatorStats s = tcp_initiator->stats();
      pool->set_in_use(s.links);
      pool->set_capacity(tcp_capacity);
      pool->set_destinations(s.destinations);
    } else if (t == gdrstore::v1::TRANSPORT_RC && rc_initiator != nullptr) {
      const gdr::RcStats s = rc_initiator->stats();
      pool->set_in_use(s.qps);
      pool->set_capacity(rc_capacity);
      pool->set_destinations(s.connections);
    }
  };
  gdr::StoreService service(store->get(), &router, cfg->limits, offered, extras);
  service.set_rc(rc.get());
  service.set_rc_detail(rc_detail);
  service.set_dc_detail(dc->detail);
  service.SetTokens(cfg->tokens);
  if (!cfg->tokens.empty()) {
    GDR_LOG(kInfo) << "token authentication on: " << cfg->tokens.size()
                   << (cfg->tokens.size() == 1 ? " token" : " tokens") << " accepted from "
                   << cfg->token_file;
    struct stat st {};
    if (::stat(cfg->token_file.c_str(), &st) == 0 && (st.st_mode & 0077) != 0) {
      GDR_LOG(kWarning) << "token file " << cfg->token_file
                        << " is readable by group or others (mode "
                        << absl::StrFormat("%04o", st.st_mode & 07777) << "); chmod 600 it";
    }
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(cfg->listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
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
                 << " (port " << port << "), transports: tcp" << (rc ? ", rc" : "");
  if (!cfg->port_file.empty()) {
    // Write-then-rename so a reader never sees a partial number.
    const std::string tmp = cfg->port_file + ".tmp";
    {
      std::ofstream out(tmp);
      out << port << "\n";
    }
    if (std::rename(tmp.c_str(), cfg->port_file.c_str()) != 0) {
      GDR_LOG(kError) << "cannot write port file " << cfg->port_file;
    }
  }

  auto notifier = gdr::SystemdNotifier::FromEnvironment();
  gdr::SupervisedDaemon d;
  d.argc = argc;
  d.argv = argv;
  d.config = *cfg;
  d.server = server.get();
  d.service = &service;
  d.store = store->get();
  // The router shuts its transports down in their order (tcp, dc, then rc whose device dc uses).
  d.initiators = {&router};
  d.health_checked = {tcp->get()};
  if (rc) {
    d.start_drain.push_back([rc_initiator] { rc_initiator->StartDrain(); });
    d.probes.push_back({"rc completion poller", [rc_initiator]() -> absl::Status {
                          if (rc_initiator->Healthy()) return absl::OkStatus();
                          return absl::UnavailableError("has not polled its CQ for 5 s");
                        }});
  }
  d.delays = &delays;
  d.syncer = &syncer;
  d.media = &media;
  d.stats = &stats;
  d.notifier = notifier.get();
  d.clients = [tcp_initiator, rc_initiator] {
    return tcp_initiator->stats().destinations +
           (rc_initiator != nullptr ? rc_initiator->stats().connections : 0);
  };
  d.serving = absl::StrCat("serving on ", cfg->listen, " (port ", port, "), transports tcp",
                           rc ? ", rc" : "");
  return gdr::ServeUntilStopped(d, signals);
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with Mutex deadlock detection, which records every lock in a
  // global graph: worth having in the tests, measurable per op on the data path.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return Run(argc, argv);
}
