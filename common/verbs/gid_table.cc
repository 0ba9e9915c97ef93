#include "common/verbs/gid_table.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace gdr::verbs {
namespace {

bool ReadLine(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::getline(in, *out);
  // sysfs refuses reads of some empty entries (EINVAL): the stream is then bad.
  if (in.bad()) return false;
  *out = std::string(absl::StripAsciiWhitespace(*out));
  return true;
}

bool IsZero(const Gid& gid) {
  for (uint8_t b : gid)
    if (b) return false;
  return true;
}

constexpr uint8_t kV4Prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

}  // namespace

absl::StatusOr<Gid> ParseGid(absl::string_view text) {
  std::vector<absl::string_view> groups = absl::StrSplit(text, ':');
  if (groups.size() != 8) {
    return absl::InvalidArgumentError(absl::StrCat("GID '", text, "' does not have 8 groups"));
  }
  Gid gid{};
  for (size_t i = 0; i < 8; ++i) {
    uint32_t v = 0;
    if (groups[i].size() != 4 || !absl::SimpleHexAtoi(groups[i], &v)) {
      return absl::InvalidArgumentError(absl::StrCat("GID '", text, "': bad group '", groups[i], "'"));
    }
    gid[2 * i] = static_cast<uint8_t>(v >> 8);
    gid[2 * i + 1] = static_cast<uint8_t>(v);
  }
  return gid;
}

std::string FormatGid(const Gid& gid) {
  std::string out;
  for (size_t i = 0; i < 8; ++i) {
    absl::StrAppendFormat(&out, "%s%02x%02x", i ? ":" : "", gid[2 * i], gid[2 * i + 1]);
  }
  return out;
}

std::optional<std::string> GidIpv4(const Gid& gid) {
  if (!std::equal(std::begin(kV4Prefix), std::end(kV4Prefix), gid.begin())) return std::nullopt;
  return absl::StrFormat("%u.%u.%u.%u", gid[12], gid[13], gid[14], gid[15]);
}

absl::StatusOr<Gid> GidForIp(absl::string_view ip) {
  const std::string text(ip);
  Gid gid{};
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    std::copy(std::begin(kV4Prefix), std::end(kV4Prefix), gid.begin());
    std::memcpy(gid.data() + 12, &v4, 4);
    return gid;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    std::memcpy(gid.data(), &v6, 16);
    return gid;
  }
  return absl::InvalidArgumentError(absl::StrCat("'", ip, "' is not an IPv4 or IPv6 address"));
}

std::string DescribeGid(const Gid& gid) {
  if (auto v4 = GidIpv4(gid)) return *v4;
  return FormatGid(gid);
}

absl::StatusOr<std::vector<GidEntry>> ReadGidTable(const std::string& sysfs_root,
                                                   const std::string& device, int port,
                                                   int table_len) {
  const std::string dir = absl::StrCat(sysfs_root, "/class/infiniband/", device, "/ports/", port);
  std::ifstream probe(dir + "/state");
  if (!probe) {
    return absl::NotFoundError(absl::StrCat("no sysfs entry for ", device, " port ", port, " (",
                                            dir, ")"));
  }
  std::vector<GidEntry> table;
  for (int i = 0; i < table_len; ++i) {
    std::string text;
    if (!ReadLine(absl::StrCat(dir, "/gids/", i), &text)) continue;
    absl::StatusOr<Gid> gid = ParseGid(text);
    if (!gid.ok() || IsZero(*gid)) continue;
    GidEntry e;
    e.index = i;
    e.gid = *gid;
    ReadLine(absl::StrCat(dir, "/gid_attrs/types/", i), &e.type);
    ReadLine(absl::StrCat(dir, "/gid_attrs/ndevs/", i), &e.netdev);
    table.push_back(std::move(e));
  }
  return table;
}

bool IsLinkLocal(const Gid& gid) { return gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80; }

namespace {

// Whether `a` and `b` (network byte order) agree in their first `prefix_len` bits.
bool SameSubnet(const uint8_t* a, const uint8_t* b, int prefix_len) {
  for (int bit = 0; bit < prefix_len && bit < 32; ++bit) {
    const uint8_t mask = static_cast<uint8_t>(0x80u >> (bit % 8));
    if ((a[bit / 8] & mask) != (b[bit / 8] & mask)) return false;
  }
  return true;
}

}  // namespace

bool OnPeerSubnet(const GidEntry& e, const Gid& peer, const std::vector<LocalIpv4>& local) {
  if (!GidIpv4(e.gid) || !GidIpv4(peer)) return false;
  for (const LocalIpv4& l : local) {
    if (!e.netdev.empty() && l.netdev != e.netdev) continue;
    if (!std::equal(l.addr.begin(), l.addr.end(), e.gid.begin() + 12)) continue;
    if (SameSubnet(l.addr.data(), peer.data() + 12, l.prefix_len)) return true;
  }
  return false;
}

absl::StatusOr<int> PickRoceV2Gid(const std::vector<GidEntry>& table, const GidPick& pick) {
  auto is_v2 = [](const GidEntry& e) { return absl::EqualsIgnoreCase(e.type, "RoCE v2"); };
  if (pick.want) {
    for (const GidEntry& e : table)
      if (is_v2(e) && e.gid == *pick.want) return e.index;
    return absl::NotFoundError(absl::StrCat("no RoCE v2 GID equals ", DescribeGid(*pick.want)));
  }
  if (pick.peer && GidIpv4(*pick.peer)) {
    // The entry whose interface address has the peer on its subnet: with VLANs or several
    // addresses, the first IPv4 entry may well be on a subnet the peer cannot reach.
    for (const GidEntry& e : table) {
      if (is_v2(e) && OnPeerSubnet(e, *pick.peer, pick.local)) return e.index;
    }
  }
  for (const GidEntry& e : table)
    if (is_v2(e) && GidIpv4(e.gid)) return e.index;
  for (const GidEntry& e : table)
    if (is_v2(e) && !IsLinkLocal(e.gid)) return e.index;
  for (const GidEntry& e : table) {
    if (!is_v2(e)) continue;
    return absl::FailedPreconditionError(absl::StrCat(
        "the only RoCE v2 GIDs of this port are link-local (GID[", e.index, "] ",
        FormatGid(e.gid), e.netdev.empty() ? "" : " on " + e.netdev,
        "): fe80::/10 reaches no other subnet; give the interface an IP address, or choose "
        "the GID with --rdma-gid-index N or --rdma-addr IP"));
  }
  return absl::NotFoundError("no RoCE v2 GID on this port");
}

absl::StatusOr<int> PickRoceV2Gid(const std::vector<GidEntry>& table,
                                  const std::optional<Gid>& want) {
  GidPick pick;
  pick.want = want;
  return PickRoceV2Gid(table, pick);
}

}  // namespace gdr::verbs
