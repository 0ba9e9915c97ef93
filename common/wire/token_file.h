// Credentials for the gdrstore.v1 service, kept in files, with the volumes each may reach.
// The daemon accepts every line of its file; a client presents the first token of its file.
//
// One credential per line; blank lines and lines starting with '#' are ignored, and a field
// starting with '#' comments out the rest of its line:
//
//   <credential> [name=<label>] [get=<volumes>] [put=<volumes>] [admin=yes|no]
//
// <credential>  a bearer token: 16-1024 printable ASCII characters, no spaces, not starting
//               with "san:"; or san:<value>: a verified client certificate one of whose
//               subjectAltName entries equals <value> exactly (a URI such as spiffe://..., a
//               DNS name, an e-mail address, an IP address as text).
// name=<label>  how logs and refusals call the line (1-64 of [A-Za-z0-9_.@:/-]); default
//               "san:<value>" for identities and "token on line N" for tokens.
// get=, put=    `*` (every volume) or volume names separated by commas. get = store -> the
//               caller's buffer (the Write RPC); put = the caller's buffer -> store (Read).
// admin=yes     may call the gdrstore.v1.Admin service (fault injection); default no. Volume
//               rights and admin are independent: an admin line with get=/put= unset keeps
//               every volume right, as a bare line does.
//
// A line with neither get= nor put= may do both on every volume: a file of bare tokens (the
// format before grants) keeps its meaning. A line that names one of them has none of the other.
#pragma once

#include <string>
#include <vector>

#include "common/wire/volume_name.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr {

inline constexpr size_t kMinTokenLength = 16;
inline constexpr size_t kMaxTokenLength = 1024;
inline constexpr absl::string_view kSanPrefix = "san:";

// What a credential may do to a volume.
enum class Right { kGet, kPut };
const char* RightName(Right right);  // "get", "put"

// The volumes one right reaches: all of them, or the names listed (sorted, unique).
struct VolumeSet {
  bool all = false;
  std::vector<std::string> names;

  bool Contains(absl::string_view volume) const;
  bool empty() const { return !all && names.empty(); }
  std::string ToString() const;  // "*", "v1,v2" or "none"
  bool operator==(const VolumeSet& o) const { return all == o.all && names == o.names; }
};

// One line of a token file.
struct Credential {
  enum class Kind { kToken, kSan };
  Kind kind = Kind::kToken;
  std::string value;  // the token (a secret: never log it), or the SAN value
  std::string label;  // name=, or the default above; safe to log
  VolumeSet get;
  VolumeSet put;
  bool admin = false;  // may call the Admin service

  const VolumeSet& volumes(Right right) const { return right == Right::kGet ? get : put; }
  // "get v1,v2; put none": the grants, for refusals and logs.
  std::string DescribeGrants() const;
  bool operator==(const Credential& o) const {
    return kind == o.kind && value == o.value && label == o.label && get == o.get &&
           put == o.put && admin == o.admin;
  }
};

// The credentials of `path`, in file order. INVALID_ARGUMENT naming the file and line when a
// line breaks the format above (token length or characters, unknown or repeated key, empty,
// repeated or malformed volume name, a credential or name given twice), or when the file holds
// no credential; NOT_FOUND / PERMISSION_DENIED when it cannot be read. Messages never quote a
// token.
absl::StatusOr<std::vector<Credential>> ReadTokenFile(const std::string& path);

// Same rules, on text already read; `source` names it in errors.
absl::StatusOr<std::vector<Credential>> ParseTokenFile(absl::string_view text,
                                                       absl::string_view source);

// The client's side: the first token of `path` (grants on its line are checked and ignored;
// san: lines are skipped). INVALID_ARGUMENT when the file breaks the format or has no token.
absl::StatusOr<std::string> ReadClientToken(const std::string& path);

// "2 tokens, 1 certificate identity" ("none" when empty): what a file admits, for logs.
std::string DescribeCredentials(const std::vector<Credential>& credentials);


// Whether `presented` equals `expected`, in time that depends on the lengths only.
bool TokenEquals(absl::string_view presented, absl::string_view expected);

}  // namespace gdr
