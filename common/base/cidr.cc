#include "common/base/cidr.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gdr {
namespace {

// Does `a` equal `b` on the first `bits` bits?
bool SamePrefix(const IpAddress& a, const IpAddress& b, int bits) {
  const auto& x = a.bytes();
  const auto& y = b.bytes();
  int i = 0;
  for (; bits >= 8; bits -= 8, ++i)
    if (x[i] != y[i]) return false;
  if (bits == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - bits));
  return (x[i] & mask) == (y[i] & mask);
}

// Whether any bit of `a` past the first `bits` is set.
bool HostBitsSet(const IpAddress& a, int bits) {
  const auto& x = a.bytes();
  for (int i = 0; i < 16; ++i) {
    const int keep = std::min(8, std::max(0, bits - 8 * i));
    const uint8_t host = static_cast<uint8_t>(keep == 8 ? 0 : (0xff >> keep));
    if (x[i] & host) return true;
  }
  return false;
}

// `a` with every bit past the first `bits` cleared, as text in the family it was written in
// (`v4_text`): an IPv4-mapped address written as IPv6 keeps its ::ffff: so the suggestion
// parses with the same prefix length.
std::string Network(const IpAddress& a, int bits, bool v4_text) {
  std::array<uint8_t, 16> b = a.bytes();
  for (int i = 0; i < 16; ++i) {
    const int keep = std::min(8, std::max(0, bits - 8 * i));
    b[i] &= static_cast<uint8_t>(keep == 0 ? 0 : (0xff << (8 - keep)));
  }
  char text[64];
  std::string out;
  if (v4_text) {
    out = absl::StrCat(b[12], ".", b[13], ".", b[14], ".", b[15]);
  } else {
    for (int i = 0; i < 16; i += 2) {
      std::snprintf(text, sizeof(text), "%s%x", i == 0 ? "" : ":", (b[i] << 8) | b[i + 1]);
      out += text;
    }
    // Parse gives the canonical short form.
    if (absl::StatusOr<IpAddress> p = IpAddress::Parse(out); p.ok()) {
      out = p->is_v4() ? absl::StrCat("::ffff:", p->ToString()) : p->ToString();
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Cidr> Cidr::Parse(absl::string_view text) {
  const size_t slash = text.find('/');
  const absl::string_view addr_text = text.substr(0, slash);
  absl::StatusOr<IpAddress> addr = IpAddress::Parse(addr_text);
  if (!addr.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad CIDR: ", addr.status().message(),
                     " (want ADDRESS/BITS, e.g. 10.0.0.0/8 or fd00::/8)"));
  }
  const int max_bits = addr->is_v4() && addr_text.find(':') == absl::string_view::npos ? 32 : 128;
  int bits = max_bits;
  if (slash != absl::string_view::npos) {
    const absl::string_view bits_text = text.substr(slash + 1);
    if (bits_text.empty() || bits_text.size() > 3 ||
        bits_text.find_first_not_of("0123456789") != absl::string_view::npos ||
        !absl::SimpleAtoi(bits_text, &bits) || bits > max_bits) {
      return absl::InvalidArgumentError(
          // The bits as written, escaped: the message may go to a log or back to a caller.
          absl::StrCat("bad CIDR '", addr->ToString(), "/",
                       absl::CHexEscape(bits_text.substr(0, 8)),
                       "': the prefix length must be 0..", max_bits));
    }
  }
  const int bits128 = max_bits == 32 ? 96 + bits : bits;
  if (HostBitsSet(*addr, bits128)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad CIDR '", addr->ToString(), "/", bits, "': bits are set past the prefix (did you mean ",
        Network(*addr, bits128, max_bits == 32), "/", bits, "?)"));
  }
  return Cidr(*addr, bits128);
}

bool Cidr::Contains(const IpAddress& address) const {
  return SamePrefix(base_, address, bits_);
}

std::string Cidr::ToString() const {
  if (base_.is_v4() && bits_ >= 96) return absl::StrCat(base_.ToString(), "/", bits_ - 96);
  return absl::StrCat(base_.ToString(), "/", bits_);
}

}  // namespace gdr
