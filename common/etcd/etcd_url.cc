#include "common/etcd/etcd_url.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/host_port.h"
#include "common/base/ip_address.h"

namespace gdr::etcd {
namespace {

constexpr absl::string_view kScheme = "etcd://";
constexpr size_t kMaxUrlBytes = 4096;
constexpr absl::string_view kForm = "etcd://HOST:PORT[,HOST:PORT...]/PREFIX";

absl::Status Bad(absl::string_view url, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("etcd URL '", url, "': ", what, " (want ", kForm, ")"));
}

// A host name (RFC 1123 labels) or an IPv4 literal: dot-separated labels of 1..63 letters,
// digits and '-', not starting or ending with '-'; 253 bytes at most.
bool IsHostName(absl::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(host, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    }
  }
  return true;
}

absl::StatusOr<std::string> ParseEndpoint(absl::string_view url, absl::string_view endpoint,
                                          size_t index, size_t count) {
  if (endpoint.empty()) {
    return Bad(url, absl::StrCat("endpoint ", index + 1, " of ", count, " is empty"));
  }
  if (absl::StartsWith(endpoint, ":") || absl::StartsWith(endpoint, "[]")) {
    return Bad(url, absl::StrCat("endpoint '", endpoint, "' has an empty host"));
  }
  absl::StatusOr<HostPort> hp = SplitHostPort(endpoint);
  if (!hp.ok()) {
    return Bad(url, absl::StrCat("endpoint '", endpoint, "': ", hp.status().message()));
  }
  // SplitHostPort's number parsing takes a sign; a port here is digits only.
  const absl::string_view port_text = endpoint.substr(endpoint.rfind(':') + 1);
  if (!std::all_of(port_text.begin(), port_text.end(),
                   [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); })) {
    return Bad(url, absl::StrCat("endpoint '", endpoint, "' has a port that is not all digits"));
  }
  if (absl::StartsWith(endpoint, "[")) {
    // Brackets hold an IPv6 literal only (no zone: a gRPC target would need it escaped).
    if (!absl::StrContains(hp->host, ':') || !IpAddress::Parse(hp->host).ok()) {
      return Bad(url, absl::StrCat("endpoint '", endpoint, "' has no IPv6 address in brackets"));
    }
  } else if (!IsHostName(hp->host)) {
    return Bad(url, absl::StrCat("endpoint '", endpoint, "' has a host that is not a host name ",
                                 "or IPv4 address (letters, digits, '-' and '.' only)"));
  }
  return JoinHostPort(hp->host, hp->port);
}

absl::StatusOr<std::string> ParsePrefix(absl::string_view url, absl::string_view path) {
  // `path` is everything after the endpoints, '/' included when present.
  if (path.empty() || path == "/") return Bad(url, "missing the key prefix after the endpoints");
  absl::string_view rest = path.substr(1);
  if (absl::EndsWith(rest, "/")) rest.remove_suffix(1);  // one trailing slash is tolerated
  std::string prefix;
  for (absl::string_view segment : absl::StrSplit(rest, '/')) {
    if (segment.empty()) return Bad(url, "the prefix has an empty segment ('//')");
    if (segment == "." || segment == "..") {
      return Bad(url, absl::StrCat("the prefix has a '", segment, "' segment"));
    }
    for (char c : segment) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
        return Bad(url, absl::StrCat("the prefix has '", std::string(1, c),
                                     "' in it (letters, digits, '-', '_', '.' and '/' only)"));
      }
    }
    absl::StrAppend(&prefix, "/", segment);
  }
  return prefix;
}

}  // namespace

absl::StatusOr<EtcdUrl> ParseEtcdUrl(absl::string_view url) {
  if (url.size() > kMaxUrlBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd URL of ", url.size(), " bytes is longer than ", kMaxUrlBytes));
  }
  for (size_t i = 0; i < url.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(url[i]);
    if (c <= 0x20 || c >= 0x7f) {
      return Bad(url, absl::StrCat("a space, control or non-ASCII character at offset ", i));
    }
  }
  if (!absl::StartsWith(url, kScheme)) {
    const size_t colon = url.find("://");
    return Bad(url, colon == absl::string_view::npos
                        ? std::string("no scheme; it must be etcd://")
                        : absl::StrCat("scheme '", url.substr(0, colon), "' is not etcd"));
  }
  const absl::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  const absl::string_view authority = rest.substr(0, slash);
  if (authority.empty()) return Bad(url, "no endpoint");

  EtcdUrl out;
  const std::vector<absl::string_view> parts = absl::StrSplit(authority, ',');
  for (size_t i = 0; i < parts.size(); ++i) {
    absl::StatusOr<std::string> endpoint = ParseEndpoint(url, parts[i], i, parts.size());
    if (!endpoint.ok()) return endpoint.status();
    if (std::find(out.endpoints.begin(), out.endpoints.end(), *endpoint) != out.endpoints.end()) {
      return Bad(url, absl::StrCat("endpoint '", parts[i], "' is listed twice"));
    }
    out.endpoints.push_back(*std::move(endpoint));
  }
  absl::StatusOr<std::string> prefix =
      ParsePrefix(url, slash == absl::string_view::npos ? "" : rest.substr(slash));
  if (!prefix.ok()) return prefix.status();
  out.prefix = *std::move(prefix);
  return out;
}

}  // namespace gdr::etcd
