// This daemon's entry in the cluster: PREFIX/members/ID in etcd, on a lease kept alive from a
// thread of its own. etcd away at start or later never stops serving: the entry is written
// (again, on a new lease if the old one expired meanwhile) once etcd answers. Stop revokes the
// lease, so a clean stop leaves the view at once; a killed daemon's entry goes with its lease.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/etcd/etcd_client.h"
#include "gdrstore/v1/cluster.pb.h"

namespace gdr {

class ClusterMember {
 public:
  struct Status {
    bool registered = false;
    int64_t lease = 0;
    std::string last_error;  // of the last failed etcd call; empty after success
  };
  // `url` checked already (CheckClusterFlags). Starts the thread; never waits for etcd.
  static absl::StatusOr<std::unique_ptr<ClusterMember>> Start(const std::string& url,
                                                              absl::Duration ttl,
                                                              gdrstore::v1::ClusterMember entry);
  ~ClusterMember();  // Stop()
  // Revokes the lease (bounded by the etcd call deadline) and ends the thread. Idempotent.
  void Stop();
  Status status() const;
  const std::string& key() const { return key_; }

 private:
  ClusterMember() = default;
  void Run();
  bool RegisterOnce();  // grant + put; false on failure (logged)

  std::unique_ptr<etcd::EtcdClient> etcd_;
  std::string key_, value_, url_;
  absl::Duration ttl_;
  absl::Notification stop_;
  mutable absl::Mutex mu_;
  Status status_ ABSL_GUARDED_BY(mu_);
  bool stopped_ = false;
  std::thread thread_;
};

// The member id by default: <hostname>-<port>.
std::string DefaultMemberId(int port);
// The address to advertise: `advertise` if set, else `listen` with its port replaced by the
// bound one and a wildcard host (0.0.0.0, [::], empty) replaced by the hostname.
absl::StatusOr<std::string> AdvertiseAddress(const std::string& advertise,
                                             const std::string& listen, int port);

}  // namespace gdr
