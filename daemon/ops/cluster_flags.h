// gdrstored's cluster flags: --cluster etcd://HOST:PORT[,HOST:PORT]/PREFIX makes the daemon a
// member (registered on a lease it keeps alive), --cluster-ttl, --cluster-id,
// --cluster-advertise (the address clients are told).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace CLI {
class App;
}

namespace gdr {

struct ClusterSettings {
  std::string url;        // empty: not a member of any cluster
  int64_t ttl_s = 10;     // the lease: a dead daemon's entry goes this long after it stops
  std::string id;         // empty: <hostname>-<port>
  std::string advertise;  // empty: the listen address (a wildcard host becomes the hostname)
  // TLS to etcd (PEM files; all empty: plaintext).
  std::string tls_ca, tls_cert, tls_key;

  bool enabled() const { return !url.empty(); }
};

// Registers the flags on `app` (config-file keys cluster, cluster-ttl, cluster-id,
// cluster-advertise, cluster-tls-ca, cluster-tls-cert, cluster-tls-key).
void AddClusterFlags(CLI::App& app, ClusterSettings* values);

// INVALID_ARGUMENT naming the flag: a URL that does not parse, an id with '/' or spaces, an
// advertise address that is not HOST:PORT, TLS files without --cluster or a key without its
// certificate.
absl::Status CheckClusterFlags(const ClusterSettings& cluster);

}  // namespace gdr
