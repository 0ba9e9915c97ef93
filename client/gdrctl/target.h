// Where a command's ops go, from the global options: one daemon (-a/-p/--daemon), or a cluster
// (--cluster URL / --cluster-file FILE) whose members are each reached with the same client
// flags. write, read and bench take either as a gdrstore::Store; the cluster commands need a
// cluster; the others always speak to the daemon.
#pragma once

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "client/gdrctl/global_options.h"
#include "gdrstore/client.h"
#include "gdrstore/cluster.h"
#include "gdrstore/store.h"

namespace gdrctl {

class Target {
 public:
  // `g` must have been through FinishGlobalOptions and outlive the Target.
  explicit Target(const GlobalOptions& g) : g_(g) {}

  bool is_cluster() const { return !g_.cluster_url.empty() || !g_.cluster_file.empty(); }

  // The daemon's client options (ClientOptionsOf of the global options).
  absl::StatusOr<gdrstore::ClientOptions> ClientOptions() const;
  // A client of the daemon.
  absl::StatusOr<std::unique_ptr<gdrstore::Client>> Connect() const;

  // Runs `run` on a client of the daemon; on a failed connect prints "gdrctl: connect: ..."
  // and returns 1 instead.
  int WithClient(const std::function<int(gdrstore::Client&)>& run) const;
  // Runs `run` on the Store the options name: the cluster when is_cluster(), else the daemon.
  // Fails (printing why) as WithCluster or WithClient does.
  int WithStore(const std::function<int(gdrstore::Store&)>& run) const;
  // Runs `run` on a client of the cluster; when it cannot be opened prints why and returns 2
  // (a bad URL or file: INVALID_ARGUMENT) or 1. Only for is_cluster().
  int WithCluster(const std::function<int(gdrstore::ClusterClient&)>& run) const;

 private:
  const GlobalOptions& g_;
};

}  // namespace gdrctl
