// gdrstored entry point: parse settings, build the store, the tcp initiator pool and the gRPC
// server, serve until SIGTERM/SIGINT, then drain and exit 0.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/units.h"
#include "daemon/daemon_config.h"
#include "daemon/dc/dc_transport.h"
#include "daemon/store.h"
#include "daemon/store_service.h"
#include "daemon/rc_initiator.h"
#include "daemon/tcp_initiator.h"
#include "daemon/transport_router.h"

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
    GDR_LOG(kInfo) << "volume " << name << ": " << gdr::FormatSize(v->size()) << " (memory)";
  }
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
  gdr::StoreService service(store->get(), &router, cfg->limits, offered);
  service.set_rc(rc.get());
  service.set_rc_detail(rc_detail);
  service.set_dc_detail(dc->detail);

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

  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGHUP) {
      GDR_LOG(kWarning) << "SIGHUP: live reload is not supported by this version; ignoring";
      continue;
    }
    GDR_LOG(kInfo) << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ": draining ("
                   << service.inflight_ops() << " ops in flight, " << service.open_streams()
                   << " streams open, up to " << absl::FormatDuration(cfg->drain_timeout) << ")";
    break;
  }
  server->GetHealthCheckService()->SetServingStatus(false);
  service.StartDrain();
  if (rc) rc->StartDrain();
  const absl::Time drain_deadline = absl::Now() + cfg->drain_timeout;
  // Server::Shutdown cancels the calls still running at the deadline, but a callback call only
  // ends once its reactor finishes, and ours finish when their transport op completes. An op
  // stuck on a target that never answers would hold Shutdown until the op timeout. So at the
  // deadline the transport fails everything still on the links (CANCELLED), which finishes
  // those calls and lets Shutdown return.
  absl::Notification drained;
  std::thread canceller([&] {
    if (!drained.WaitForNotificationWithDeadline(drain_deadline)) router.Shutdown();
  });
  // Stops accepting calls, lets running ones finish until the deadline, then cancels the rest.
  server->Shutdown(absl::ToChronoTime(drain_deadline));
  server->Wait();
  drained.Notify();
  canceller.join();
  // Anything a cancelled call left on the links or QPs fails now; they close. Idempotent.
  router.Shutdown();
  GDR_LOG(kInfo) << "stopped cleanly";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with Mutex deadlock detection, which records every lock in a
  // global graph: worth having in the tests, measurable per op on the data path.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return Run(argc, argv);
}
