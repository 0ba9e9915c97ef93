// HOST:PORT addresses as users type them and gRPC takes them: "host:50051", "10.0.0.7:50051",
// "[fe80::1]:50051". Splitting is strict (one form, a port in 1..65535) so a mistyped address
// is refused with its text quoted rather than turned into a DNS lookup of something odd.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr {

struct HostPort {
  std::string host;  // without brackets
  uint16_t port = 0;
};

// "host:port" or "[v6]:port". INVALID_ARGUMENT quoting `address` otherwise.
absl::StatusOr<HostPort> SplitHostPort(absl::string_view address);

// "host:port", the host bracketed when it is an IPv6 address.
std::string JoinHostPort(absl::string_view host, uint16_t port);

// localhost, ::1 or 127.0.0.0/8.
bool IsLoopbackHost(absl::string_view host);

}  // namespace gdr
