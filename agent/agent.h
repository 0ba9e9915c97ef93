// gdragent as a whole: owns its parts (the upstream client, the session table, the gRPC server
// the clients' channels are served on, the handoff socket) in the order they start and stop,
// and its life under systemd: READY=1 once the socket listens, STATUS lines, the watchdog, and
// on SIGTERM a drain within the configured deadline. Its credentials toward the daemons (token
// and TLS files) are read again when they change (a Kubernetes Secret swapped) or on SIGHUP.
#pragma once

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "agent/agent_config.h"
#include "agent/agent_service.h"
#include "agent/client_table.h"
#include "agent/upstreams.h"
#include "absl/synchronization/mutex.h"
#include "common/handoff/handoff_server.h"
#include "common/process/file_watcher.h"
#include "common/process/systemd_notifier.h"

namespace gdr::agent {

class Agent {
 public:
  // Connects upstream, starts the gRPC server (no port: channels come over the socket) and
  // then the handoff socket. The failing part's error, naming what it was.
  static absl::StatusOr<std::unique_ptr<Agent>> Start(AgentConfig config);
  // Stops every part, in reverse order. Ops still in flight must have ended (Drain).
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Tells systemd READY=1 and serves until SIGTERM or SIGINT (SIGHUP: ReloadCredentials),
  // the watchdog pinged while an in-process Ping comes back
  // (common/process/service_loop.h, as gdrstored), then drains; returns the process's exit
  // code. `signals` must be blocked in every thread (sigwait takes them here).
  int ServeUntilSignalled(const sigset_t& signals);

  // "3 clients, 12 ops in flight, agent -> 127.0.0.1:50051 over tcp (...)".
  std::string StatusLine() const;

 private:
  explicit Agent(AgentConfig config) : config_(std::move(config)) {}
  absl::Status StartParts();
  handoff::HandoffServerOptions HandoffOptions();
  // Sweeps deregistered regions (and connections new credentials replaced) until stop_ is
  // notified.
  void Housekeeping();
  // Reads the token file and TLS files again, checked as at start, and reconnects upstream
  // with them; a file that does not pass (or a connection that fails) leaves the running
  // credentials in place. Logged either way, `why` first ("SIGHUP", "PATH changed").
  void ReloadCredentials(const std::string& why);
  // Watches the credential files (null when there are none, or inotify is refused: logged).
  std::unique_ptr<FileWatcher> WatchCredentials();
  // Refuses new ops, closes the socket (sessions end; their regions live on in their ops),
  // waits up to the drain deadline for the ops in flight, then stops the server. False when
  // ops were still in flight at the deadline.
  bool Drain();

  const AgentConfig config_;
  const std::unique_ptr<SystemdNotifier> notifier_ = SystemdNotifier::FromEnvironment();
  std::unique_ptr<Upstreams> upstream_;
  std::unique_ptr<ClientTable> sessions_;
  std::unique_ptr<AgentService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<handoff::HandoffServer> handoff_;
  // Notified once the service knows the handoff server: no channel is served before.
  absl::Notification serving_;
  absl::Notification stop_;
  std::thread housekeeping_;
  absl::Mutex reload_mu_;  // one reload at a time (a file change, SIGHUP)
};

}  // namespace gdr::agent
