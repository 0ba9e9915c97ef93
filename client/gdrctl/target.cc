#include "client/gdrctl/target.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/gdrctl/command.h"

namespace gdrctl {

absl::StatusOr<gdrstore::ClientOptions> Target::ClientOptions() const {
  return ClientOptionsOf(g_);
}

absl::StatusOr<std::unique_ptr<gdrstore::Client>> Target::Connect() const {
  absl::StatusOr<gdrstore::ClientOptions> o = ClientOptions();
  if (!o.ok()) return o.status();
  return gdrstore::Client::Connect(*o);
}

int Target::WithClient(const std::function<int(gdrstore::Client&)>& run) const {
  absl::StatusOr<std::unique_ptr<gdrstore::Client>> client = Connect();
  if (!client.ok()) return Fail(client.status(), "connect");
  return run(**client);
}

int Target::WithCluster(const std::function<int(gdrstore::ClusterClient&)>& run) const {
  absl::StatusOr<gdrstore::ClientOptions> o = ClientOptions();
  if (!o.ok()) return Fail(o.status(), "connect");
  gdrstore::ClusterOptions co;
  co.etcd_url = g_.cluster_url;
  co.members_file = g_.cluster_file;
  co.etcd_tls_ca = g_.cluster_tls_ca;
  co.etcd_tls_cert = g_.cluster_tls_cert;
  co.etcd_tls_key = g_.cluster_tls_key;
  co.client = *std::move(o);
  co.etcd_timeout = std::chrono::milliseconds(std::min<int64_t>(g_.timeout_ms, 10000));
  absl::StatusOr<std::unique_ptr<gdrstore::ClusterClient>> cl = gdrstore::ClusterClient::Open(co);
  if (!cl.ok()) {
    return Fail(absl::IsInvalidArgument(cl.status()) ? kExitUsage : kExitFailed,
                absl::StrCat("cluster: ", cl.status().message()));
  }
  return run(**cl);
}

int Target::WithStore(const std::function<int(gdrstore::Store&)>& run) const {
  if (is_cluster()) return WithCluster(run);
  return WithClient(run);
}

}  // namespace gdrctl
