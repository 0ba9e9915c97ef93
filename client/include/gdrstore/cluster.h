// A cluster of gdrstored daemons as one namespace. Members come from etcd (each daemon
// started with --cluster registers itself under PREFIX/members/ID on a lease) or from a static
// members file; a cluster volume is the same-named volume on several members, cut into stripe
// units placed by the rule in cluster.proto, with R replicas. A ClusterClient splits each op
// by stripe and sends the pieces to every member involved at once, over one Stream per member
// (all members reach this process's memory through one transport, each buffer registered once):
// a put (buffer -> store, Read on the wire) is acknowledged when all R replicas have every
// piece; a get (store -> buffer, Write on the wire) reads each piece from its first healthy
// replica and tries the next when one fails. With R = 1 an op touching a dead member's stripes
// fails with UNAVAILABLE naming the member; pieces on the others are unaffected.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gdrstore/client.h"
#include "gdrstore/v1/cluster.pb.h"

namespace gdr::cluster {
class MemberLink;
}  // namespace gdr::cluster

namespace gdrstore {

struct ClusterOptions {
  // etcd://HOST:PORT[,HOST:PORT]/PREFIX, or (when empty) a static members file: JSON of a
  // gdrstore.v1.ClusterFile.
  std::string etcd_url;
  std::string members_file;
  // TLS to etcd (PEM files; all empty: plaintext): its CA (empty: the system's roots), and the
  // client certificate and key etcd's --client-cert-auth asks for (both or neither). etcd_url
  // only. Checked by Open before any connection.
  std::string etcd_tls_ca, etcd_tls_cert, etcd_tls_key;
  // How each member is reached: transport, token, TLS, rails... (daemon_address is set per
  // member from its entry).
  ClientOptions client;
  // A member whose op failed for a reason another try may cure is passed over this long
  // before it is connected again.
  std::chrono::milliseconds member_retry{1000};
  // Deadline of each etcd call.
  std::chrono::milliseconds etcd_timeout{2000};
};

// What this client knows of a member and has sent it.
struct ClusterMemberStatus {
  gdrstore::v1::ClusterMember entry;
  bool present = false;  // registered now (etcd) or listed (file)
  bool healthy = false;  // answered a Ping just now
  std::string error;     // why not, when not
  // etcd only: seconds the member's lease has left; -1 when unknown.
  int64_t lease_ttl_s = -1;
  uint64_t ops = 0, bytes = 0, errors = 0;  // pieces this client sent it
};

// A cluster's buffers are Buffers (one type for every Store), registered when made through the
// first member's connection, whose transport every member reaches them by. The old name stays.
using ClusterBuffer = Buffer;

class ClusterClient : public Store {
 public:
  // Reads the members (etcd or file) and connects to them lazily. INVALID_ARGUMENT for a URL
  // or file that does not parse (naming what is wrong), and for etcd TLS files that cannot be
  // read, hold no PEM, are half a pair or a key not the certificate's (naming the option and the
  // file); UNAVAILABLE when etcd does not answer or refuses the handshake (naming each endpoint).
  static absl::StatusOr<std::unique_ptr<ClusterClient>> Open(const ClusterOptions& options);
  // Closes every member link; async ops still running fail (CANCELLED) and their callbacks
  // have returned before it does. Not from one of its ops' callbacks.
  ~ClusterClient() override;
  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;

  // Buffers: Store's AllocateBuffer, RegisterHostMemory, ... through the first member
  // connected (RegisteringClient). A Buffer belongs to this ClusterClient (another Store
  // refuses it) and may outlive it.
  absl::StatusOr<Client*> RegisteringClient() override;

  // Creates cluster volume `name` over `members` (empty: every member present now, by id),
  // writing its layout once; ALREADY_EXISTS when it exists. Each member must serve a volume
  // `name`; the logical size follows from the smallest of them. etcd clusters only.
  absl::StatusOr<gdrstore::v1::ClusterVolume> CreateVolume(const std::string& name,
                                                           uint64_t stripe_unit,
                                                           uint32_t replicas,
                                                           std::vector<std::string> members);
  // What the overload below makes on every member first, through each member's Admin
  // service (Client::CreateVolume; an admin token where members have token files): a volume
  // `name` just big enough that the cluster volume holds `size` bytes, rounded up to whole
  // rows; a file in the members' writable --volume-dir with `file`; `media` as --volume's.
  struct MemberVolumes {
    uint64_t size = 0;
    bool file = false;
    std::string media;
  };
  // As above, after making the members' volumes. A member that refuses stops it: the volumes
  // already made on the others are deleted again (their files too, where made now), and the
  // error names the member.
  absl::StatusOr<gdrstore::v1::ClusterVolume> CreateVolume(const std::string& name,
                                                           uint64_t stripe_unit,
                                                           uint32_t replicas,
                                                           std::vector<std::string> members,
                                                           const MemberVolumes& make);
  // Removes cluster volume `name`: its layout first (new ops on it are NOT_FOUND), then, with
  // `member_volumes`, the volume `name` on each of its members (their files too with
  // `delete_files`, where the members' writable --volume-dir holds them). NOT_FOUND when it has
  // no layout; a member that could not delete its volume is named (the others are still
  // deleted). etcd clusters only.
  absl::Status DeleteVolume(const std::string& name, bool member_volumes, bool delete_files);
  // Store: DeleteVolume(name, true, delete_file); CreateVolume makes the members' volumes
  // first when spec.size is set (MemberVolumes), else lays the volume over those they serve;
  // ListVolumes: Volumes(), each by its logical size.
  absl::Status DeleteVolume(const std::string& name, bool delete_file) override;
  absl::Status CreateVolume(const StoreVolumeSpec& spec) override;
  absl::StatusOr<std::vector<StoreVolume>> ListVolumes() override;
  absl::StatusOr<gdrstore::v1::ClusterVolume> Layout(const std::string& volume);
  std::vector<gdrstore::v1::ClusterVolume> Volumes();

  // Ops (Store's Put, Get, Submit; SubmitAsync below): a put (buffer -> store) goes to every
  // replica, a get (store -> buffer) reads one replica of each piece. `options` as a Client
  // op's: the deadline is the whole op's, failovers included (unset:
  // ClusterOptions::client.rpc_timeout); crc32c checks each piece on its own; sync makes each
  // piece of a put wait for msync. INVALID_ARGUMENT for sync on a get, or for a buffer another
  // Store made ("another ClusterClient"); NOT_FOUND for a volume with no layout.
  // SubmitAsync: `done` runs once, when every piece is answered, on a member's stream thread
  // (or this thread for an op refused at once), with OpResult's bytes and path; ops in flight
  // when the ClusterClient goes fail CANCELLED before it is gone. The links the op needs are
  // connected on this thread, so it may block on a member's Connect.
  void SubmitAsync(OpKind kind, const Extent& extent, const Buffer& buffer, size_t buffer_offset,
                   OpCallback done, const OpOptions& options = {}) override;

  // The path ops on `buffer` take to the members ("tcp/host", "rc:mlx5_0/dma-buf"), as
  // OpResult::path words it; "" for a buffer another Store made.
  std::string PathOf(const Buffer& buffer) const override;
  // "cluster " + source().
  std::string ConnectedTo() const override;

  // Every member known, present or not, with a fresh Ping of each.
  std::vector<ClusterMemberStatus> Members();
  // "etcd://..." or the file's path.
  const std::string& source() const;

 private:
  struct State;
  struct Op;  // one op in flight (cluster_client.cc)
  explicit ClusterClient(std::unique_ptr<State> state);
  // Whether `buffer` is registered with this ClusterClient's members' shared transport.
  bool Owns(const Buffer& buffer) const;
  std::unique_ptr<State> state_;
};

}  // namespace gdrstore
