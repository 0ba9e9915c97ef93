// The caller's address as gRPC reports it (ServerContext::peer()): "ipv4:10.0.0.7:41234",
// "ipv6:[fd00::7]:41234" (brackets percent-encoded as %5B/%5D by some gRPC versions),
// "unix:/run/gdrstored.sock", "unix-abstract:...". The daemon decides from it where a caller
// may ask it to connect, so anything not in one of these forms is refused, never guessed at.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/base/ip_address.h"

namespace gdr {

struct GrpcPeer {
  enum class Kind { kIp, kUnix };
  Kind kind = Kind::kIp;
  IpAddress ip;  // kIp: the address (IPv4-mapped normalised)
};

// INVALID_ARGUMENT, quoting a bounded printable prefix, for any other text (in-process
// channels, an empty string, a port out of range, a host name).
absl::StatusOr<GrpcPeer> ParseGrpcPeer(absl::string_view peer);

// Whether two peer strings name the same caller address: the same IP (ports ignored), or both
// on a unix socket. Two strings that do not parse match only when equal.
bool SamePeerAddress(absl::string_view a, absl::string_view b);

}  // namespace gdr
