// Fuzzes the address parsers the daemon applies to text it does not control: IpAddress::Parse
// (common/base/ip_address.h), Cidr::Parse (common/base/cidr.h, the --tcp-target-allow list) and
// ParseGrpcPeer (common/grpc/grpc_peer.h, the caller's address as gRPC reports it), all on the same
// input. Properties:
// - A refusal is INVALID_ARGUMENT with a printable message of bounded length.
// - An address prints (ToString) to text that parses back to it, and that text is canonical;
//   is_v4 means the IPv4-mapped prefix, IsLoopback 127/8 or ::1.
// - A prefix prints to text that parses back to it, contains its own base, and matches an
//   address iff the address agrees on the prefix bits; a prefix refused for host bits set past
//   it suggests one ("did you mean N/B?") that parses and contains the address written.
// - A peer is unix: or unix-abstract: (no address), or ipv4:/ipv6: with an address that the
//   daemon's own spelling of the peer gives back; ipv4: peers are IPv4.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/base/cidr.h"
#include "common/grpc/grpc_peer.h"
#include "common/base/ip_address.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using gdr::Cidr;
using gdr::IpAddress;

void CheckRefusal(const absl::Status& status) {
  GDR_FUZZ_CHECK(absl::IsInvalidArgument(status));
  GDR_FUZZ_CHECK(!status.message().empty() && status.message().size() <= 512);
  for (char c : status.message()) GDR_FUZZ_CHECK(c >= 0x20 && c <= 0x7e);
}

bool PrefixBitsEqual(const IpAddress& a, const IpAddress& b, int bits) {
  for (int i = 0; i < bits; ++i) {
    const int bit_a = (a.bytes()[i / 8] >> (7 - i % 8)) & 1;
    const int bit_b = (b.bytes()[i / 8] >> (7 - i % 8)) & 1;
    if (bit_a != bit_b) return false;
  }
  return true;
}

void CheckAddress(const IpAddress& ip) {
  const std::string text = ip.ToString();
  GDR_FUZZ_CHECK(!text.empty());
  absl::StatusOr<IpAddress> again = IpAddress::Parse(text);
  GDR_FUZZ_CHECK(again.ok() && *again == ip && again->ToString() == text);
  const auto& b = ip.bytes();
  bool mapped = b[10] == 0xff && b[11] == 0xff;
  for (int i = 0; i < 10; ++i) mapped = mapped && b[i] == 0;
  GDR_FUZZ_CHECK(ip.is_v4() == mapped);
  GDR_FUZZ_CHECK(ip.is_v4() == (text.find(':') == std::string::npos));
  bool v6_loopback = b[15] == 1;
  for (int i = 0; i < 15; ++i) v6_loopback = v6_loopback && b[i] == 0;
  GDR_FUZZ_CHECK(ip.IsLoopback() == (ip.is_v4() ? b[12] == 127 : v6_loopback));
}

void CheckCidr(absl::string_view text, const IpAddress* probe) {
  absl::StatusOr<Cidr> cidr = Cidr::Parse(text);
  if (!cidr.ok()) {
    CheckRefusal(cidr.status());
    // A prefix with host bits set is refused with the one it probably meant: that must parse.
    const absl::string_view msg = cidr.status().message();
    // The last one: an address the parser could not read is quoted before it, and may say
    // anything.
    constexpr absl::string_view kMeant = "bits are set past the prefix (did you mean ";
    const size_t at = msg.rfind(kMeant);
    if (at != absl::string_view::npos) {
      absl::string_view meant = msg.substr(at + kMeant.size());
      meant = meant.substr(0, meant.find('?'));
      absl::StatusOr<Cidr> suggested = Cidr::Parse(meant);
      GDR_FUZZ_CHECK(suggested.ok());
      absl::StatusOr<IpAddress> written = IpAddress::Parse(text.substr(0, text.find('/')));
      GDR_FUZZ_CHECK(written.ok() && suggested->Contains(*written));
    }
    return;
  }
  const std::string printed = cidr->ToString();
  absl::StatusOr<Cidr> again = Cidr::Parse(printed);
  GDR_FUZZ_CHECK(again.ok() && *again == *cidr && again->ToString() == printed);
  const size_t slash = printed.find('/');
  GDR_FUZZ_CHECK(slash != std::string::npos);
  absl::StatusOr<IpAddress> base = IpAddress::Parse(printed.substr(0, slash));
  GDR_FUZZ_CHECK(base.ok());
  CheckAddress(*base);
  GDR_FUZZ_CHECK(cidr->Contains(*base));
  int bits = std::stoi(printed.substr(slash + 1));
  if (base->is_v4()) bits += 96;
  GDR_FUZZ_CHECK(bits >= 0 && bits <= 128);
  if (probe != nullptr) {
    GDR_FUZZ_CHECK(cidr->Contains(*probe) == PrefixBitsEqual(*base, *probe, bits));
  }
}

void CheckPeer(absl::string_view text) {
  absl::StatusOr<gdr::GrpcPeer> peer = gdr::ParseGrpcPeer(text);
  if (!peer.ok()) {
    CheckRefusal(peer.status());
    return;
  }
  if (peer->kind == gdr::GrpcPeer::Kind::kUnix) {
    GDR_FUZZ_CHECK(absl::StartsWith(text, "unix:") || absl::StartsWith(text, "unix-abstract:"));
    return;
  }
  GDR_FUZZ_CHECK(absl::StartsWith(text, "ipv4:") || absl::StartsWith(text, "ipv6:"));
  if (absl::StartsWith(text, "ipv4:")) GDR_FUZZ_CHECK(peer->ip.is_v4());
  CheckAddress(peer->ip);
  const std::string spelled =
      peer->ip.is_v4() ? absl::StrCat("ipv4:", peer->ip.ToString(), ":1")
                       : absl::StrCat("ipv6:[", peer->ip.ToString(), "]:65535");
  absl::StatusOr<gdr::GrpcPeer> again = gdr::ParseGrpcPeer(spelled);
  GDR_FUZZ_CHECK(again.ok() && again->kind == gdr::GrpcPeer::Kind::kIp && again->ip == peer->ip);
  absl::StatusOr<gdr::GrpcPeer> bracketed =
      gdr::ParseGrpcPeer(absl::StrCat("ipv6:%5B", peer->ip.ToString(), "%5D:1"));
  GDR_FUZZ_CHECK(bracketed.ok() && bracketed->ip == peer->ip);
}

}  // namespace

// The input is one text; a prefix is also matched against the address parsed from the text
// after its first newline, when there is one.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nl = input.find('\n');
  const absl::string_view text = input.substr(0, nl);
  absl::StatusOr<IpAddress> ip = IpAddress::Parse(text);
  if (ip.ok()) {
    CheckAddress(*ip);
  } else {
    CheckRefusal(ip.status());
  }
  absl::StatusOr<IpAddress> probe = IpAddress::Parse(
      nl == absl::string_view::npos ? absl::string_view() : input.substr(nl + 1));
  CheckCidr(text, probe.ok() ? &*probe : (ip.ok() ? &*ip : nullptr));
  CheckPeer(text);
  return 0;
}
