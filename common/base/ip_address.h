// An IPv4 or IPv6 address as one 16-byte value. IPv4 is held in its IPv4-mapped IPv6 form
// (::ffff:a.b.c.d), so 10.0.0.7 and ::ffff:10.0.0.7 (how a dual-stack socket reports an IPv4
// peer) are the same value and every comparison or prefix match sees one form only.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr {

class IpAddress {
 public:
  IpAddress() = default;  // :: (the unspecified address)
  // A numeric IPv4 or IPv6 literal, no brackets, no zone, no host name. INVALID_ARGUMENT
  // quoting a bounded, printable prefix of the text otherwise.
  static absl::StatusOr<IpAddress> Parse(absl::string_view text);
  // The address of an AF_INET / AF_INET6 sockaddr; INVALID_ARGUMENT for another family.
  static absl::StatusOr<IpAddress> FromSockaddr(const struct sockaddr* sa, socklen_t len);

  bool is_v4() const;
  // 127.0.0.0/8 or ::1.
  bool IsLoopback() const;
  // Dotted quad for IPv4 (mapped ones included), RFC 5952 text for IPv6.
  std::string ToString() const;
  // The 16 bytes in network order (IPv4 mapped).
  const std::array<uint8_t, 16>& bytes() const { return bytes_; }

  bool operator==(const IpAddress&) const = default;

 private:
  explicit IpAddress(const std::array<uint8_t, 16>& b) : bytes_(b) {}
  std::array<uint8_t, 16> bytes_{};
};

}  // namespace gdr
