#include "daemon/transport/tcp/tcp_target_rule.h"

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_peer.h"

namespace gdr {
namespace {

bool IsHostLoopback(const IpAddress& a) {
  static const IpAddress v4 = *IpAddress::Parse("127.0.0.1");
  static const IpAddress v6 = *IpAddress::Parse("::1");
  return a == v4 || a == v6;
}

}  // namespace

absl::Status TcpTargetRule::Check(absl::string_view caller, const std::string& name,
                                  const IpAddress& target) const {
  for (const Cidr& c : allow_)
    if (c.Contains(target)) return absl::OkStatus();
  absl::StatusOr<GrpcPeer> peer = ParseGrpcPeer(caller);
  if (peer.ok()) {
    if (peer->kind == GrpcPeer::Kind::kUnix && target.IsLoopback()) return absl::OkStatus();
    if (peer->kind == GrpcPeer::Kind::kIp &&
        (peer->ip == target || (IsHostLoopback(peer->ip) && IsHostLoopback(target)))) {
      return absl::OkStatus();
    }
  }
  const std::string why =
      !peer.ok() ? "the caller's address is not one the daemon can compare"
      : peer->kind == GrpcPeer::Kind::kUnix
          ? "a caller on a unix socket may only name loopback targets"
          : "it is not the caller's own address";
  return absl::PermissionDeniedError(absl::StrCat(
      "tcp target ", name, " (", target.ToString(), ") refused: ", why, " (caller ",
      caller.substr(0, 96), "); the daemon connects only to the "
      "address a request comes from unless started with --tcp-target-allow covering the target "
      "(e.g. --tcp-target-allow ", target.ToString(), target.is_v4() ? "/32" : "/128", ")"));
}

absl::Status TcpTargetRule::CheckAll(absl::string_view caller, const std::string& name,
                                     const std::vector<SocketAddress>& targets) const {
  for (const SocketAddress& a : targets) {
    absl::StatusOr<IpAddress> ip = IpAddress::FromSockaddr(a.get(), a.length);
    if (!ip.ok()) {
      return absl::PermissionDeniedError(
          absl::StrCat("tcp target ", name, " resolved to an address that is not IP"));
    }
    if (absl::Status s = Check(caller, name, *ip); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::string TcpTargetRule::CallerClass(absl::string_view caller) {
  absl::StatusOr<GrpcPeer> peer = ParseGrpcPeer(caller);
  if (!peer.ok()) return "?";
  if (peer->kind == GrpcPeer::Kind::kUnix) return "unix";
  return peer->ip.ToString();
}

std::string TcpTargetRule::Describe() const {
  std::string out = "targets: the caller's own address";
  for (const Cidr& c : allow_) absl::StrAppend(&out, ", ", c.ToString());
  return out;
}

}  // namespace gdr
