#include "common/base/host_port.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gdr {

absl::StatusOr<HostPort> SplitHostPort(absl::string_view address) {
  HostPort out;
  absl::string_view port_text;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("bad address '", address, "' (want [V6]:PORT)"));
    }
    out.host = std::string(address.substr(1, close - 1));
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos || colon == 0 || address.find(':') != colon) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad address '", address, "' (want HOST:PORT, an IPv6 host in brackets: [V6]:PORT)"));
    }
    out.host = std::string(address.substr(0, colon));
    port_text = address.substr(colon + 1);
  }
  uint32_t p = 0;
  if (out.host.empty() || !absl::SimpleAtoi(port_text, &p) || p == 0 || p > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in '", address, "' (want 1..65535)"));
  }
  out.port = static_cast<uint16_t>(p);
  return out;
}

std::string JoinHostPort(absl::string_view host, uint16_t port) {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

bool IsLoopbackHost(absl::string_view host) {
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace gdr
