// Where a cluster keeps its layout in etcd, as one string users pass around:
// etcd://HOST:PORT[,HOST:PORT...]/PREFIX. Parsing is strict so a mistyped URL is refused
// naming the part that is wrong, never turned into a lookup of an odd host or key range.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr::etcd {

struct EtcdUrl {
  std::vector<std::string> endpoints;  // "host:port" ("[v6]:port"), in the order given
  std::string prefix;                  // "/x/y": leading slash, no trailing slash, never empty
};

// INVALID_ARGUMENT quoting `url` and naming the wrong part: the scheme (only etcd://), an empty
// endpoint in the list, an empty host, one that is not a host name or IPv4 address (or in brackets,
// an IPv6 address), a port outside 1..65535 or not all digits, an endpoint listed twice, a missing
// prefix, an empty, '.' or '..' segment in it or a character outside [A-Za-z0-9._-], whitespace or
// control characters anywhere, or a URL longer than 4096 bytes.
absl::StatusOr<EtcdUrl> ParseEtcdUrl(absl::string_view url);

}  // namespace gdr::etcd
