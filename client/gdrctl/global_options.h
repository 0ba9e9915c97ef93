// gdrctl's global options, given before the command: where the daemon is, how this process
// reaches it (transport, RDMA device, rails, security), the output format and the cluster
// target. One struct, added to the app once.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "gdrstore/client.h"
#include "gdrstore/client_environment.h"

namespace gdrctl {

// The connection flags (transport, RDMA, rails, security, timeouts: gdrstore::ConnectionFlags,
// the fields gdragent's flags share) and gdrctl's own.
struct GlobalOptions : gdrstore::ConnectionFlags {
  std::string address = "127.0.0.1";
  uint16_t port = 50051;
  // HOST:PORT, wins over -a/-p; after Finish, the address resolved (-a/-p, else
  // $GDRSTORE_ADDRESS, else 127.0.0.1:50051)
  std::string daemon;
  bool json = false;  // --json, before the command or after it (main wires it once)
  std::string cluster_url, cluster_file;  // --cluster / --cluster-file: the target is a cluster
  std::string cluster_tls_ca, cluster_tls_cert, cluster_tls_key;  // TLS to --cluster's etcd

  // Set by Finish from what the command line named.
  bool port_given = false;       // -p
  bool daemon_explicit = false;  // --daemon, -a, -p or $GDRSTORE_ADDRESS
};

// Adds the global options (and --version, --json) to the root app, bound to `*g`.
void AddGlobalOptions(CLI::App& app, GlobalOptions* g);

// The one --json flag: on the root app and, by main(), after each command that prints JSON.
void AddJsonFlag(CLI::App* app, GlobalOptions* g);

// After parsing: notes which options were given, checks --timeout-ms and resolves the daemon's
// HOST:PORT into `daemon` ($GDRSTORE_ADDRESS where the command line names none). INVALID_ARGUMENT (a usage error) with the message gdrctl prints.
absl::Status FinishGlobalOptions(const CLI::App& app, GlobalOptions* g);

// The client's options from the global ones (agent, token file and TLS files from the
// environment where the flags are absent). Errors: the token file cannot be read, a malformed
// variable (named), a bad --rails list.
absl::StatusOr<gdrstore::ClientOptions> ClientOptionsOf(const GlobalOptions& g);

}  // namespace gdrctl
