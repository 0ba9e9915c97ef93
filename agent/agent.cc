#include "agent/agent.h"

#include <grpcpp/server_posix.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/cluster_upstream.h"
#include "agent/daemon_set.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/base/thread_name.h"
#include "common/grpc/in_process_ping.h"
#include "common/handoff/host_id.h"
#include "common/process/health_monitor.h"
#include "common/process/service_loop.h"

namespace gdr::agent {

namespace {

// The daemons as configured: named one by one, behind a DNS name, or a cluster.
absl::StatusOr<std::unique_ptr<Upstreams>> ConnectUpstreams(const AgentConfig& config) {
  if (!config.daemon_service.empty()) {
    return DaemonSet::Discover(config.upstream, config.daemon_service, config.resolve_interval,
                               config.upstream_streams);
  }
  if (config.cluster_url.empty() && config.cluster_file.empty()) {
    return DaemonSet::Connect(config.upstream, config.daemons, config.upstream_streams);
  }
  gdrstore::ClusterOptions o;
  o.etcd_url = config.cluster_url;
  o.members_file = config.cluster_file;
  o.etcd_tls_ca = config.cluster_tls_ca;
  o.etcd_tls_cert = config.cluster_tls_cert;
  o.etcd_tls_key = config.cluster_tls_key;
  o.client = config.upstream;
  return ClusterUpstream::Open(o, config.cluster_workers);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Agent>> Agent::Start(AgentConfig config) {
  std::unique_ptr<Agent> agent(new Agent(std::move(config)));
  GDR_RETURN_IF_ERROR(agent->StartParts());
  return agent;
}

absl::Status Agent::StartParts() {
  GDR_ASSIGN_OR_RETURN(upstream_, ConnectUpstreams(config_));
  sessions_ = std::make_unique<ClientTable>(config_.max_ops_per_client);
  service_ = std::make_unique<AgentService>(
      upstream_.get(), sessions_.get(),
      AgentServiceOptions{config_.socket_path, handoff::HostId(), ::getuid(),
                          config_.max_streams_per_client});
  grpc::ServerBuilder builder;
  builder.RegisterService(service_.get());
  // What one channel may make the agent hold: requests are control messages (the daemon takes
  // no more either), and calls at once are the client's ops in flight and a few more.
  builder.SetMaxReceiveMessageSize(1 << 20);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(config_.max_ops_per_client) + 64);
  // No listening port: every channel is a socket a client handed over (AddInsecureChannelFromFd).
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) return absl::InternalError("cannot start the gRPC server");
  absl::StatusOr<std::unique_ptr<handoff::HandoffServer>> h =
      handoff::HandoffServer::Start(HandoffOptions());
  if (!h.ok()) {
    return absl::Status(h.status().code(),
                        absl::StrCat("socket ", config_.socket_path, ": ", h.status().message()));
  }
  handoff_ = *std::move(h);
  service_->set_handoff(handoff_.get());
  serving_.Notify();
  housekeeping_ = std::thread([this] { Housekeeping(); });
  GDR_LOG(kInfo) << "gdragent " << GDR_VERSION << " serving " << config_.socket_path
                 << " (mode 0" << std::oct << config_.socket_mode << std::dec
                 << "; uids 0" << (::getuid() == 0 ? "" : absl::StrCat(", ", ::getuid()))
                 << (config_.allow_uids.empty()
                         ? ""
                         : absl::StrCat(", ", absl::StrJoin(config_.allow_uids, ", ")))
                 << (config_.allow_gids.empty()
                         ? ""
                         : absl::StrCat("; gids ", absl::StrJoin(config_.allow_gids, ", ")))
                 << "); " << upstream_->Path();
  return absl::OkStatus();
}

handoff::HandoffServerOptions Agent::HandoffOptions() {
  handoff::HandoffServerOptions o;
  o.socket_path = config_.socket_path;
  o.socket_mode = config_.socket_mode;
  o.server_name = absl::StrCat("gdragent ", GDR_VERSION);
  o.max_regions_per_session = config_.max_regions_per_client;
  o.max_bytes_per_session = config_.max_bytes_per_client;
  o.max_channels_per_session = config_.max_channels_per_client;
  o.max_sessions = config_.max_clients;
  o.fd_reserve = config_.fd_reserve;
  o.names = handoff::HandoffLimitNames::Flags("");
  o.hello_timeout = config_.hello_timeout;
  o.admit = [self = ::getuid(), uids = config_.allow_uids,
             gids = config_.allow_gids](const PeerCredentials& p) -> absl::Status {
    if (p.uid == 0 || p.uid == self || std::find(uids.begin(), uids.end(), p.uid) != uids.end() ||
        std::find(gids.begin(), gids.end(), p.gid) != gids.end()) {
      return absl::OkStatus();
    }
    return absl::PermissionDeniedError(absl::StrCat(
        "gdragent: uid ", p.uid, " (gid ", p.gid, ", pid ", p.pid,
        ") may not use this agent: its --allow-uid and --allow-gid lists do not name it"));
  };
  o.on_register = [this](const handoff::SessionInfo& s,
                         const std::shared_ptr<handoff::ImportedRegion>& region) -> absl::Status {
    absl::StatusOr<std::unique_ptr<UpstreamMemory>> memory = upstream_->Register(*region);
    if (!memory.ok()) {
      return Prefixed("gdragent: cannot register the region with ", memory.status());
    }
    sessions_->Add(s, region, *std::move(memory));
    return absl::OkStatus();
  };
  o.on_channel = [this](const handoff::SessionInfo& s, ScopedFd fd) -> absl::Status {
    // The socket takes sessions as soon as it listens, before Start has handed the server to
    // the service: a channel given to gRPC then carried ops refused as "the agent is starting".
    // This session's own thread waits the moment that takes.
    if (!serving_.WaitForNotificationWithTimeout(config_.hello_timeout)) {
      return absl::UnavailableError("gdragent: the agent is starting");
    }
    // The agent's own end of the pair the handoff server made: an open file no client shares,
    // so the O_NONBLOCK its gRPC pollers need (one blocking read would stall every call of the
    // server) stays set.
    const int flags = ::fcntl(fd.get(), F_GETFL, 0);
    if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
      return absl::ErrnoToStatus(errno, "gdragent: cannot make the channel's socket non-blocking");
    }
    const int channel = fd.Release();  // gRPC's from here (closed when the client's end goes)
    service_->AddChannel(channel, s);
    grpc::AddInsecureChannelFromFd(server_.get(), channel);
    GDR_LOG(kDebug) << "channel from " << DescribeClient(s);
    return absl::OkStatus();
  };
  o.on_session_end = [this](const handoff::SessionInfo& s) {
    sessions_->End(s.id);
    GDR_LOG(kDebug) << "session " << s.id << " of " << DescribeClient(s) << " ended";
  };
  return o;
}

Agent::~Agent() {
  stop_.Notify();
  if (housekeeping_.joinable()) housekeeping_.join();
  if (handoff_ != nullptr) handoff_->Stop();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
  }
  handoff_.reset();
  server_.reset();
  service_.reset();
  sessions_.reset();
  upstream_.reset();
}

std::string Agent::StatusLine() const {
  const handoff::HandoffStats hs = handoff_ != nullptr ? handoff_->stats() : handoff::HandoffStats{};
  return absl::StrCat(hs.sessions, " clients, ", hs.regions, " regions, ",
                      service_->inflight_ops(), " ops in flight; ", upstream_->Path());
}

void Agent::Housekeeping() {
  SetThreadName("gdragent-house");
  while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    sessions_->Sweep();
    upstream_->Sweep();
  }
}

void Agent::ReloadCredentials(const std::string& why) {
  absl::MutexLock lock(&reload_mu_);
  // The flags as at start: the token file read and checked by the same function.
  absl::StatusOr<gdrstore::ClientOptions> options = gdrstore::ClientOptionsFromFlags(
      config_.upstream_flags, "", gdrstore::FlagEnvironment::kIgnore);
  absl::Status st = options.status();
  if (st.ok()) st = upstream_->Reconnect(*options);
  if (!st.ok()) {
    GDR_LOG(kError) << why << ": credentials not reloaded, the running ones kept: "
                    << st.message();
    return;
  }
  GDR_LOG(kInfo) << why << ": credentials reloaded; new ops go over new connections ("
                 << upstream_->Path() << ")";
}

std::unique_ptr<FileWatcher> Agent::WatchCredentials() {
  const gdrstore::ConnectionFlags& f = config_.upstream_flags;
  std::vector<std::string> paths = {f.token_file, f.tls_ca, f.tls_cert, f.tls_key,
                                    config_.cluster_tls_ca, config_.cluster_tls_cert,
                                    config_.cluster_tls_key};
  if (std::all_of(paths.begin(), paths.end(), [](const std::string& p) { return p.empty(); })) {
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<FileWatcher>> w =
      FileWatcher::Start(paths, [this](const std::vector<std::string>& changed) {
        ReloadCredentials(absl::StrCat(absl::StrJoin(changed, ", "), " changed"));
      });
  if (!w.ok()) {
    GDR_LOG(kWarning) << "token and TLS files not watched (re-read on SIGHUP only): "
                      << w.status().message();
    return nullptr;
  }
  return *std::move(w);
}

int Agent::ServeUntilSignalled(const sigset_t& signals) {
  const absl::Duration period = HealthMonitor::PeriodFor(*notifier_);
  HealthMonitor monitor(notifier_.get(), period, [this] { return StatusLine(); });
  // The gRPC executor answers: a real Ping through the server must come back.
  monitor.AddProbe("grpc server",
                   InProcessPing(server_.get(), std::min(period / 2, absl::Seconds(2))));
  ServiceLoop loop;
  loop.notifier = notifier_.get();
  loop.status_line = [this] { return StatusLine(); };
  // Kubernetes updates a mounted Secret without a signal: a change of the token or TLS files
  // reloads them as SIGHUP does. The other settings need a restart.
  loop.reload = [this] { ReloadCredentials("SIGHUP"); };
  std::unique_ptr<FileWatcher> watcher = WatchCredentials();
  const int sig = ServeUntilStopSignal(loop, &monitor, signals);
  watcher.reset();
  GDR_LOG(kInfo) << SignalName(sig) << ": draining (" << service_->inflight_ops()
                 << " ops in flight, up to " << absl::FormatDuration(config_.drain_timeout) << ")";
  if (!Drain()) {
    // Their upstream calls cannot be cut short from here; the clients see their channels
    // close (UNAVAILABLE) as the process goes, and the daemon its connection.
    GDR_LOG(kWarning) << "drain deadline reached with " << service_->inflight_ops()
                      << " ops in flight; exiting without them";
    std::_Exit(0);
  }
  GDR_LOG(kInfo) << "stopped cleanly";
  return 0;
}

bool Agent::Drain() {
  notifier_->Stopping(absl::StrCat("draining ", service_->inflight_ops(), " ops in flight"));
  const absl::Time deadline = absl::Now() + config_.drain_timeout;
  service_->StartDrain();
  handoff_->Stop();
  while (service_->inflight_ops() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (service_->inflight_ops() > 0) return false;
  // Calls still open carry no op (idle Streams): cancelled now.
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  return true;
}

}  // namespace gdr::agent
