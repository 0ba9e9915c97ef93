// An address prefix as operators write it, "10.0.0.0/8" or "fd00::/8": the daemon's
// --tcp-target-allow list. IPv4 prefixes match IPv4 addresses however they arrive (plain or
// IPv4-mapped IPv6), since IpAddress holds both in one form.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/base/ip_address.h"

namespace gdr {

class Cidr {
 public:
  // "ADDRESS/BITS" (IPv4: 0..32, IPv6: 0..128) or a bare address (one host). The address must
  // have no bits set past the prefix ("10.0.0.1/8" is refused, naming "10.0.0.0/8"), so a typo
  // cannot silently widen or shift the range. INVALID_ARGUMENT quoting the text otherwise.
  static absl::StatusOr<Cidr> Parse(absl::string_view text);

  bool Contains(const IpAddress& address) const;
  // "ADDRESS/BITS" in the family it was written in.
  std::string ToString() const;
  bool operator==(const Cidr&) const = default;

 private:
  Cidr(IpAddress base, int bits) : base_(base), bits_(bits) {}
  IpAddress base_;
  int bits_ = 0;  // over the 128-bit (IPv4-mapped) form
};

}  // namespace gdr
