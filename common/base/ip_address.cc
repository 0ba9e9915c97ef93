#include "common/base/ip_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace gdr {
namespace {

constexpr std::array<uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

std::array<uint8_t, 16> MapV4(const void* v4) {
  std::array<uint8_t, 16> b{};
  std::memcpy(b.data(), kMappedPrefix.data(), kMappedPrefix.size());
  std::memcpy(b.data() + 12, v4, 4);
  return b;
}

// What a caller sent, fit to be quoted in an error: bounded, printable.
std::string Shown(absl::string_view text) {
  std::string s(text.substr(0, 64));
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  return s;
}

}  // namespace

absl::StatusOr<IpAddress> IpAddress::Parse(absl::string_view text) {
  // inet_pton needs a terminated string; anything longer than an IPv6 literal is not one.
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", Shown(text), "' is not an IPv4 or IPv6 address"));
  }
  const std::string z(text);
  uint8_t buf[16];
  if (::inet_pton(AF_INET, z.c_str(), buf) == 1) return IpAddress(MapV4(buf));
  if (::inet_pton(AF_INET6, z.c_str(), buf) == 1) {
    std::array<uint8_t, 16> b;
    std::memcpy(b.data(), buf, 16);
    return IpAddress(b);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", Shown(text), "' is not an IPv4 or IPv6 address"));
}

absl::StatusOr<IpAddress> IpAddress::FromSockaddr(const struct sockaddr* sa, socklen_t len) {
  if (sa != nullptr && sa->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return IpAddress(MapV4(&in->sin_addr));
  }
  if (sa != nullptr && sa->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    std::array<uint8_t, 16> b;
    std::memcpy(b.data(), &in6->sin6_addr, 16);
    return IpAddress(b);
  }
  return absl::InvalidArgumentError("not an IPv4 or IPv6 socket address");
}

bool IpAddress::is_v4() const {
  return std::memcmp(bytes_.data(), kMappedPrefix.data(), kMappedPrefix.size()) == 0;
}

bool IpAddress::IsLoopback() const {
  if (is_v4()) return bytes_[12] == 127;
  static constexpr std::array<uint8_t, 16> kV6Loopback = {0, 0, 0, 0, 0, 0, 0, 0,
                                                          0, 0, 0, 0, 0, 0, 0, 1};
  return bytes_ == kV6Loopback;
}

std::string IpAddress::ToString() const {
  char out[INET6_ADDRSTRLEN] = {};
  if (is_v4()) {
    ::inet_ntop(AF_INET, bytes_.data() + 12, out, sizeof(out));
  } else {
    ::inet_ntop(AF_INET6, bytes_.data(), out, sizeof(out));
  }
  return out;
}

}  // namespace gdr
