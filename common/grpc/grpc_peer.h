// gRPC's address text, read in one place. The caller's address as gRPC reports it
// (ServerContext::peer()): "ipv4:10.0.0.7:41234", "ipv6:[fd00::7]:41234" (brackets
// percent-encoded as %5B/%5D by some gRPC versions), "unix:/run/gdrstored.sock",
// "unix-abstract:...". The daemon decides from it where a caller may ask it to connect, so
// anything not in one of these forms is refused, never guessed at. And a client channel's target
// ("HOST:PORT", "dns:///HOST:PORT", "ipv4:", "ipv6:", "unix:PATH").
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/base/host_port.h"
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

// The caller's address without its port, as a fault rule's client= names it: "127.0.0.1" of
// "ipv4:127.0.0.1:4242", "[::1]" of "ipv6:[::1]:4242" or "ipv6:%5B::1%5D:4242" (an IPv4-mapped
// address as its dotted quad); text in no form ParseGrpcPeer takes, or a unix socket, as given.
std::string GrpcPeerHost(absl::string_view peer);

// Where a client channel's target points: a unix socket ("unix:PATH", "unix:///PATH") or a
// HOST:PORT ("HOST:PORT", and after a "dns:///", "ipv4:" or "ipv6:" prefix).
struct GrpcTarget {
  std::string unix_path;  // set for a unix socket
  HostPort host_port;     // otherwise
};
// INVALID_ARGUMENT for an empty unix path or a HOST:PORT that SplitHostPort refuses.
absl::StatusOr<GrpcTarget> ParseGrpcTarget(absl::string_view target);

}  // namespace gdr
