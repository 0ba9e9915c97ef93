#include "common/grpc/grpc_peer.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gdr {
namespace {

std::string Shown(absl::string_view text) {
  std::string s(text.substr(0, 96));
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  return s;
}

absl::Status Bad(absl::string_view peer) {
  return absl::InvalidArgumentError(
      absl::StrCat("caller address '", Shown(peer), "' is not ipv4:A:P, ipv6:[A]:P or unix:PATH"));
}

bool ValidPort(absl::string_view text) {
  uint32_t port = 0;
  return !text.empty() && text.size() <= 5 &&
         text.find_first_not_of("0123456789") == absl::string_view::npos &&
         absl::SimpleAtoi(text, &port) && port <= 65535;
}

}  // namespace

absl::StatusOr<GrpcPeer> ParseGrpcPeer(absl::string_view peer) {
  GrpcPeer out;
  if (absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "unix-abstract:")) {
    out.kind = GrpcPeer::Kind::kUnix;
    return out;
  }
  absl::string_view host, port;
  if (absl::StartsWith(peer, "ipv4:")) {
    const absl::string_view rest = peer.substr(5);
    const size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos) return Bad(peer);
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (host.find(':') != absl::string_view::npos) return Bad(peer);
  } else if (absl::StartsWith(peer, "ipv6:")) {
    absl::string_view rest = peer.substr(5);
    absl::string_view open = "[", close = "]:";
    if (absl::StartsWithIgnoreCase(rest, "%5B")) {
      open = "%5B";
      close = "%5D:";
    }
    if (!absl::StartsWithIgnoreCase(rest, open)) return Bad(peer);
    rest.remove_prefix(open.size());
    size_t end = absl::string_view::npos;
    for (size_t i = 0; i + close.size() <= rest.size(); ++i) {
      if (absl::EqualsIgnoreCase(rest.substr(i, close.size()), close)) {
        end = i;
        break;
      }
    }
    if (end == absl::string_view::npos) return Bad(peer);
    host = rest.substr(0, end);
    port = rest.substr(end + close.size());
    // A link-local caller carries a zone ("fe80::1%eth0", "%25eth0" encoded): the address
    // without it is what a target address can be compared with.
    const size_t zone = host.find('%');
    if (zone != absl::string_view::npos) host = host.substr(0, zone);
  } else {
    return Bad(peer);
  }
  if (!ValidPort(port)) return Bad(peer);
  absl::StatusOr<IpAddress> ip = IpAddress::Parse(host);
  if (!ip.ok()) return Bad(peer);
  out.ip = *ip;
  return out;
}

bool SamePeerAddress(absl::string_view a, absl::string_view b) {
  absl::StatusOr<GrpcPeer> pa = ParseGrpcPeer(a);
  absl::StatusOr<GrpcPeer> pb = ParseGrpcPeer(b);
  if (!pa.ok() || !pb.ok()) return pa.ok() == pb.ok() && a == b;
  if (pa->kind != pb->kind) return false;
  return pa->kind == GrpcPeer::Kind::kUnix || pa->ip == pb->ip;
}

std::string GrpcPeerHost(absl::string_view peer) {
  absl::StatusOr<GrpcPeer> p = ParseGrpcPeer(peer);
  if (!p.ok() || p->kind != GrpcPeer::Kind::kIp) return std::string(peer);
  return p->ip.is_v4() ? p->ip.ToString() : absl::StrCat("[", p->ip.ToString(), "]");
}

absl::StatusOr<GrpcTarget> ParseGrpcTarget(absl::string_view target) {
  GrpcTarget out;
  if (absl::StartsWith(target, "unix:")) {
    absl::string_view path = target;
    if (!absl::ConsumePrefix(&path, "unix://")) absl::ConsumePrefix(&path, "unix:");
    if (path.empty()) return absl::InvalidArgumentError("unix socket path");
    out.unix_path = std::string(path);
    return out;
  }
  absl::string_view rest = target;
  for (absl::string_view prefix : {"dns:///", "ipv4:", "ipv6:"}) {
    if (absl::ConsumePrefix(&rest, prefix)) break;
  }
  absl::StatusOr<HostPort> hp = SplitHostPort(rest);
  if (!hp.ok()) return hp.status();
  out.host_port = *std::move(hp);
  return out;
}

}  // namespace gdr
