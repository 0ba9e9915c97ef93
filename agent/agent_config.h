// gdragent's settings: flags and an optional config file (same keys as the long flags,
// TOML/INI `key = value`), checked and turned into what the agent runs on: its Unix socket and
// who may use it, the per-client limits, and how it reaches its storage daemon.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/log.h"
#include "gdrstore/client_environment.h"
#include "gdrstore/types.h"

namespace gdr::agent {

struct AgentConfig {
  // The handoff socket clients connect to: the only thing a container needs mounted.
  std::string socket_path = "/run/gdragent/agent.sock";
  mode_t socket_mode = 0660;
  // Who may open a session besides root and the agent's own uid (which always may): these
  // uids, and processes whose (effective, primary) gid is one of these gids.
  std::vector<uid_t> allow_uids;
  std::vector<gid_t> allow_gids;
  // Per client session: registered bytes (0: unlimited), regions, ops in flight, channels
  // open (0: derived from RLIMIT_NOFILE, HandoffServerOptions::max_channels_per_session);
  // sessions at once.
  uint64_t max_bytes_per_client = 0;
  uint32_t max_regions_per_client = 4096;
  uint32_t max_ops_per_client = 1024;
  uint32_t max_channels_per_client = 0;
  uint32_t max_streams_per_client = 256;
  uint32_t max_clients = 1024;
  // Descriptors no client may take (0: an eighth of RLIMIT_NOFILE, 16..1024).
  uint32_t fd_reserve = 0;
  absl::Duration hello_timeout = absl::Seconds(5);
  // Where ops go: the storage daemons (HOST:PORT, each volume to the one serving it), every
  // address a DNS name resolves to (a headless Service's, resolved again every
  // resolve_interval), or a cluster (an etcd URL or a members file); exactly one is set.
  std::vector<std::string> daemons;
  std::string daemon_service;
  absl::Duration resolve_interval = absl::Seconds(10);
  std::string cluster_url;
  std::string cluster_file;
  // TLS to the cluster's etcd (PEM files; all empty: plaintext).
  std::string cluster_tls_ca, cluster_tls_cert, cluster_tls_key;
  // How the agent reaches them (transport, TLS, token, RDMA devices, rpc_timeout: each op's
  // deadline when its caller gave none); daemon_address is set per daemon.
  gdrstore::ClientOptions upstream;
  // The flags `upstream` was made from: turned into options again (its token file read, its
  // TLS files checked as they were at start) when one of those files changes.
  gdrstore::ConnectionFlags upstream_flags;
  // Long-lived Stream calls to each daemon that carry the clients' ops.
  uint32_t upstream_streams = 4;
  // A cluster's ops block until every piece is answered: this many run at once.
  uint32_t cluster_workers = 16;
  // SIGTERM: stop taking new ops and wait this long for those in flight.
  absl::Duration drain_timeout = absl::Seconds(10);
  LogLevel log_level = LogLevel::kInfo;
};

// Parses argv. CANCELLED carrying the help text for --help (print it, exit 0); INVALID_ARGUMENT
// naming the flag otherwise.
absl::StatusOr<AgentConfig> ParseAgentConfig(int argc, char** argv);

}  // namespace gdr::agent
