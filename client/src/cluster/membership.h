// Where a ClusterClient learns the cluster: etcd (members and layouts read once, then followed
// with a watch on the prefix) or a static members file. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/etcd/etcd_client.h"
#include "gdrstore/v1/cluster.pb.h"

namespace gdr::cluster {

class Membership {
 public:
  struct Member {
    gdrstore::v1::ClusterMember entry;
    bool present = false;  // registered now; absent members stay known once seen
    int64_t lease = 0;     // etcd lease of the entry
  };

  // etcd://HOST:PORT[,...]/PREFIX: reads members/ and volumes/ under PREFIX and watches them.
  static absl::StatusOr<std::unique_ptr<Membership>> OpenEtcd(const std::string& url,
                                                              const etcd::EtcdTls& tls,
                                                              absl::Duration call_timeout);
  // A JSON ClusterFile: members all present, volumes as listed (each checked).
  static absl::StatusOr<std::unique_ptr<Membership>> OpenFile(const std::string& path);
  ~Membership();

  std::map<std::string, Member> members() const;
  std::optional<Member> member(const std::string& id) const;
  // The layout of `volume`: NOT_FOUND when none exists, INVALID_ARGUMENT naming the key when
  // its entry is malformed.
  absl::StatusOr<gdrstore::v1::ClusterVolume> layout(const std::string& volume) const;
  std::vector<gdrstore::v1::ClusterVolume> volumes() const;
  // OK when layouts can be written here (etcd); FAILED_PRECONDITION saying why not.
  absl::Status Writable() const;
  // Writes a new layout once (etcd only): ALREADY_EXISTS when the volume has one.
  absl::Status CreateLayout(const gdrstore::v1::ClusterVolume& layout);
  // Removes a layout (etcd only): NOT_FOUND when the volume has none.
  absl::Status DeleteLayout(const std::string& volume);
  // etcd only: the member's lease TTL left; NOT_FOUND when it has none.
  absl::StatusOr<absl::Duration> LeaseLeft(const std::string& id) const;
  const std::string& source() const { return source_; }
  bool is_etcd() const { return etcd_ != nullptr; }

 private:
  Membership() = default;
  absl::Status Load();  // etcd: the whole prefix, then the watch from the revision read
  void Apply(const etcd::WatchEvent& e);  // under mu_
  std::string members_prefix() const { return prefix_ + "/members/"; }
  std::string volumes_prefix() const { return prefix_ + "/volumes/"; }

  std::string source_;
  std::string prefix_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  mutable std::mutex mu_;
  std::map<std::string, Member> members_;
  // A layout, or the error its entry gave.
  std::map<std::string, absl::StatusOr<gdrstore::v1::ClusterVolume>> layouts_;
  std::unique_ptr<etcd::EtcdClient::Watch> watch_;  // last: stopped first
};

}  // namespace gdr::cluster
