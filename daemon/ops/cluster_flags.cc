#include "daemon/ops/cluster_flags.h"

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "common/etcd/etcd_url.h"
#include "common/base/host_port.h"

namespace gdr {

void AddClusterFlags(CLI::App& app, ClusterSettings* v) {
  app.add_option("--cluster", v->url,
                 "register in the cluster kept in etcd: etcd://HOST:PORT[,HOST:PORT]/PREFIX "
                 "(under PREFIX/members/ID, on a lease kept alive; serving goes on while etcd "
                 "is away)");
  app.add_option("--cluster-ttl", v->ttl_s,
                 "seconds of the registration's lease: how long a dead daemon stays listed")
      ->capture_default_str()->check(CLI::Range(int64_t{2}, int64_t{3600}));
  app.add_option("--cluster-id", v->id, "member id (default: <hostname>-<port>)");
  app.add_option("--cluster-advertise", v->advertise,
                 "HOST:PORT clients of the cluster reach this daemon at (default: the listen "
                 "address, a wildcard host replaced by the hostname)");
  app.add_option("--cluster-tls-ca", v->tls_ca,
                 "TLS to etcd: trust the CA(s) of this PEM (etcd's --trusted-ca-file)");
  app.add_option("--cluster-tls-cert", v->tls_cert,
                 "TLS to etcd: the client certificate (PEM) etcd's --client-cert-auth asks for");
  app.add_option("--cluster-tls-key", v->tls_key, "private key of --cluster-tls-cert");
}

absl::Status CheckClusterFlags(const ClusterSettings& c) {
  if (!c.enabled()) {
    if (!c.id.empty() || !c.advertise.empty()) {
      return absl::InvalidArgumentError("--cluster-id/--cluster-advertise need --cluster");
    }
    if (!c.tls_ca.empty() || !c.tls_cert.empty() || !c.tls_key.empty()) {
      return absl::InvalidArgumentError("--cluster-tls-ca/cert/key need --cluster");
    }
    return absl::OkStatus();
  }
  if (absl::Status st = etcd::ParseEtcdUrl(c.url).status(); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--cluster: ", st.message()));
  }
  if (!c.id.empty() && (c.id.size() > 128 || c.id.find_first_of("/ \t\n") != std::string::npos)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cluster-id '", c.id, "' must be 1..128 bytes without '/' or spaces"));
  }
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--cluster-tls-cert and --cluster-tls-key go together: give both or neither");
  }
  if (!c.advertise.empty()) {
    if (absl::Status st = SplitHostPort(c.advertise).status(); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--cluster-advertise: ", st.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace gdr
