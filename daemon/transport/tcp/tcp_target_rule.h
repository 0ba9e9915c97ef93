// Where a caller may send the daemon's tcp links: by default only to the caller's own address
// (the address its gRPC call comes from), so nobody who reaches the gRPC port can make storage
// hosts connect to, push data to or pull data from a third party. --tcp-target-allow CIDRs
// widen it explicitly (a client whose target listens on another interface or host).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/base/cidr.h"
#include "common/base/ip_address.h"
#include "common/base/socket.h"

namespace gdr {

class TcpTargetRule {
 public:
  explicit TcpTargetRule(std::vector<Cidr> allow) : allow_(std::move(allow)) {}

  // May a caller at `caller` (gRPC peer text) have the daemon connect to `target`? Yes when an
  // allowed CIDR contains it; when it is the caller's own address (127.0.0.1 and ::1 count as
  // one: "localhost" reaches either); for a caller over a unix socket, when it is loopback.
  // PERMISSION_DENIED naming the target (`name` plus the address), the caller and the flag
  // that would allow it otherwise. Thread-safe.
  absl::Status Check(absl::string_view caller, const std::string& name,
                     const IpAddress& target) const;
  // Check for every address a host name resolved to: one refused address refuses them all.
  absl::Status CheckAll(absl::string_view caller, const std::string& name,
                        const std::vector<SocketAddress>& targets) const;

  // The part of the caller that decides what it may reach: its address, or "unix"; "?" when
  // the text is not a caller address. Links are pooled per value, so a link checked for one
  // caller never carries the ops of a caller the rule would judge differently.
  static std::string CallerClass(absl::string_view caller);

  // "caller's own address" plus the allowed CIDRs, for the start-up line.
  std::string Describe() const;

 private:
  std::vector<Cidr> allow_;
};

}  // namespace gdr
