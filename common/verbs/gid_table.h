// A port's GID table as the kernel publishes it in sysfs (gids/N, gid_attrs/types/N,
// gid_attrs/ndevs/N), and the rule that picks the GID a RoCE connection uses: a RoCE v2 entry
// whose GID is the interface's IP address (IPv4-mapped for IPv4).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr::verbs {

using Gid = std::array<uint8_t, 16>;

struct GidEntry {
  int index = 0;
  Gid gid{};
  std::string type;   // "RoCE v2", "IB/RoCE v1"; empty when sysfs does not say
  std::string netdev; // network interface the entry belongs to; empty on InfiniBand
};

// "fe80:0000:0000:0000:...": eight groups of four hex digits. INVALID_ARGUMENT otherwise.
absl::StatusOr<Gid> ParseGid(absl::string_view text);
// Same text form as sysfs.
std::string FormatGid(const Gid& gid);
// The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d) as "a.b.c.d"; nullopt otherwise.
std::optional<std::string> GidIpv4(const Gid& gid);
// The GID RoCE v2 uses for an IP literal (IPv4 -> IPv4-mapped; IPv6 as is).
// INVALID_ARGUMENT when `ip` is not an IP literal.
absl::StatusOr<Gid> GidForIp(absl::string_view ip);
// Human form of a GID: the IPv4 address when mapped, else the sysfs text.
std::string DescribeGid(const Gid& gid);

// Reads every non-zero entry of `device` port `port` below `sysfs_root` (normally "/sys").
// `table_len` is the port's gid_tbl_len. NOT_FOUND when the port directory is missing.
absl::StatusOr<std::vector<GidEntry>> ReadGidTable(const std::string& sysfs_root,
                                                   const std::string& device, int port,
                                                   int table_len);

// True for a link-local GID (fe80::/10): it names an interface, not a routable address.
bool IsLinkLocal(const Gid& gid);

// One IPv4 address of a local interface (getifaddrs): what a GID entry's netdev carries.
struct LocalIpv4 {
  std::string netdev;
  std::array<uint8_t, 4> addr{};  // network byte order
  int prefix_len = 32;
};

// Whether entry `e` is an IPv4 GID whose interface address has `peer` (IPv4-mapped) on its
// subnet, per `local`: the entry can reach the peer without a router.
bool OnPeerSubnet(const GidEntry& e, const Gid& peer, const std::vector<LocalIpv4>& local);

// What the GID is chosen by.
struct GidPick {
  // A local address (--rdma-addr): only the RoCE v2 entry with exactly this GID fits.
  std::optional<Gid> want;
  // The peer's address where known (the client knows the daemon's GID): the RoCE v2 entry
  // whose address shares the peer's subnet on the entry's netdev, per `local`.
  std::optional<Gid> peer;
  std::vector<LocalIpv4> local;
};

// Picks the entry to use: with `want`, that entry or NOT_FOUND. Otherwise the RoCE v2 IPv4
// entry on the peer's subnet when a peer is given and one is; else the first RoCE v2
// IPv4-mapped entry, then the first RoCE v2 entry that is not link-local. A port whose only
// RoCE v2 GIDs are link-local is FAILED_PRECONDITION (such a GID reaches no other subnet and
// names no address a peer chose), naming --rdma-gid-index and --rdma-addr; NOT_FOUND when no
// RoCE v2 entry exists.
absl::StatusOr<int> PickRoceV2Gid(const std::vector<GidEntry>& table, const GidPick& pick);
absl::StatusOr<int> PickRoceV2Gid(const std::vector<GidEntry>& table,
                                  const std::optional<Gid>& want);

}  // namespace gdr::verbs
