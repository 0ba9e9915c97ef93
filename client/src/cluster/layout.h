// The placement rule of a cluster volume (see ClusterVolume in cluster.proto), the checks a
// layout entry must pass before a client trusts it, and the JSON form it has in etcd.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gdrstore/v1/cluster.pb.h"

namespace gdr::cluster {

constexpr uint64_t kMinStripeUnit = 4096;
constexpr uint64_t kMaxStripeUnit = 1ull << 30;
constexpr uint64_t kDefaultStripeUnit = 4ull << 20;
constexpr size_t kMaxMembers = 1024;

// One replica of a piece: the member (index into the layout's members) and the byte of its
// volume where the piece starts.
struct Placement {
  uint32_t member = 0;
  uint64_t offset = 0;
};

// The part of an op inside one stripe unit.
struct Piece {
  uint64_t op_offset = 0;  // from the op's first byte (= the buffer offset it uses)
  uint64_t length = 0;
  uint64_t stripe = 0;
  std::vector<Placement> replicas;  // replica 0 first
};

// Where logical [offset, offset + length) of `layout` lies; the layout must have passed
// CheckLayout and the range must be inside layout.size() (OUT_OF_RANGE naming both otherwise).
absl::StatusOr<std::vector<Piece>> Split(const gdrstore::v1::ClusterVolume& layout,
                                         uint64_t offset, uint64_t length);

// The logical size a layout reaches when the smallest member volume has `member_bytes`: whole
// rows of N stripe units, each member holding `replicas` units per row.
uint64_t LogicalSize(uint64_t stripe_unit, size_t members, uint32_t replicas,
                     uint64_t member_bytes);

// A layout fit to use: name, stripe unit (a power of two in [4 KiB, 1 GiB]), members (1..1024,
// distinct, not empty), replicas (1..N), size (a whole number of rows, nonzero).
// INVALID_ARGUMENT naming the field.
absl::Status CheckLayout(const gdrstore::v1::ClusterVolume& layout);

// The checks of an entry under `key` (etcd key or file entry): a layout passes CheckLayout and
// is named as the key's last part; a member has that id and a HOST:PORT address.
// INVALID_ARGUMENT naming the key.
absl::Status CheckLayoutEntry(absl::string_view key, const gdrstore::v1::ClusterVolume& layout);
absl::Status CheckMemberEntry(absl::string_view key, const gdrstore::v1::ClusterMember& member);
// Parses the JSON of etcd key `key` (or a file entry) and checks it; the error names the key.
absl::StatusOr<gdrstore::v1::ClusterVolume> ParseLayout(absl::string_view key,
                                                        absl::string_view json);
absl::StatusOr<gdrstore::v1::ClusterMember> ParseMember(absl::string_view key,
                                                        absl::string_view json);
// Compact JSON of either message.
std::string ToJson(const google::protobuf::Message& message);

}  // namespace gdr::cluster
