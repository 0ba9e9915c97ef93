// This daemon's entry in the cluster: PREFIX/members/ID in etcd, on a lease kept alive from a
// thread of its own. etcd away at start or later never stops serving: the entry is written
// (again, on a new lease if the old one expired meanwhile) once etcd answers. Stop revokes the
// lease, so a clean stop leaves the view at once; a killed daemon's entry goes with its lease.
// The entry may be replaced while serving (Update: the volumes made and deleted at run time);
// the thread writes the newest on the same key and lease, which a client's watch sees as a PUT.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
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
  // `url` checked already (CheckClusterFlags). Starts the thread; never waits for etcd. A TLS
  // file that cannot be read or holds no PEM: the etcd client's error, naming it.
  static absl::StatusOr<std::unique_ptr<ClusterMember>> Start(const std::string& url,
                                                              const etcd::EtcdTls& tls,
                                                              absl::Duration ttl,
                                                              gdrstore::v1::ClusterMember entry);
  ~ClusterMember();  // Stop()
  // Replaces the entry: the member's thread writes it on the current lease at once (never the
  // caller, which does not wait on etcd), and while etcd is away the newest entry is the one
  // written once it answers (a lease lost meanwhile is replaced, as in Start). `entry` keeps
  // the id it started with (the key does not move): one with another id is refused, logged.
  // Thread-safe; after Stop it is kept but never written.
  void Update(const gdrstore::v1::ClusterMember& entry);
  // Revokes the lease (bounded by the etcd call deadline) and ends the thread. Idempotent;
  // not to be called concurrently with itself.
  void Stop();
  Status status() const;
  const std::string& key() const { return key_; }

 private:
  ClusterMember() = default;
  void Run();
  bool RegisterOnce(const std::string& value);  // grant + put; false on failure (logged)
  // Writes `value` on `lease`. NOT_FOUND when the lease is gone; etcd's error otherwise.
  absl::Status PutOnce(const std::string& value, int64_t lease);
  // What ends the thread's wait before its deadline: Stop, or an Update to write.
  bool Woken() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || changed_; }

  std::unique_ptr<etcd::EtcdClient> etcd_;
  std::string id_, key_, url_;
  absl::Duration ttl_;
  mutable absl::Mutex mu_;
  std::string value_ ABSL_GUARDED_BY(mu_);  // the entry, JSON
  bool changed_ ABSL_GUARDED_BY(mu_) = false;  // Update since the thread last looked
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
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
