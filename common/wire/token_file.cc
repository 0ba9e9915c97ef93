#include "common/wire/token_file.h"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gdr {
namespace {

constexpr size_t kMaxLabelLength = 64;
constexpr size_t kMaxSanLength = 1024;

bool Printable(char c) { return c >= 0x21 && c <= 0x7e; }

// The first byte of `s` outside printable ASCII, or -1.
int FirstBadByte(absl::string_view s) {
  for (char c : s) {
    if (!Printable(c)) return static_cast<unsigned char>(c);
  }
  return -1;
}

bool IsLabelSyntax(absl::string_view s) {
  if (s.empty() || s.size() > kMaxLabelLength) return false;
  for (char c : s) {
    const bool ok = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                    c == '-' || c == '@' || c == ':' || c == '/';
    if (!ok) return false;
  }
  return true;
}

// A key is quoted in errors only when it cannot be a piece of a token pasted in the wrong
// place: a short lowercase word.
bool SafeToQuoteKey(absl::string_view key) {
  if (key.empty() || key.size() > 12) return false;
  return std::all_of(key.begin(), key.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; });
}

// A name from the file, for an error message: escaped and cut short.
std::string Quoted(absl::string_view s) {
  return absl::StrCat("'", absl::CHexEscape(s.substr(0, kMaxLabelLength)),
                      s.size() > kMaxLabelLength ? "...'" : "'");
}

// `value` of get=/put=: `*` or comma-separated volume names.
absl::StatusOr<VolumeSet> ParseVolumes(absl::string_view key, absl::string_view value) {
  VolumeSet set;
  if (value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        key, "= names no volume (give * or volume names separated by commas)"));
  }
  if (value == "*") {
    set.all = true;
    return set;
  }
  for (absl::string_view name : absl::StrSplit(value, ',')) {
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(key, "= holds an empty volume name"));
    }
    if (name == "*") {
      return absl::InvalidArgumentError(
          absl::StrCat(key, "=* means every volume and takes no names beside it"));
    }
    if (!IsVolumeNameSyntax(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          key, "= volume ", Quoted(name), " is not a volume name (", kVolumeNameRule, ")"));
    }
    set.names.emplace_back(name);
  }
  std::sort(set.names.begin(), set.names.end());
  auto dup = std::adjacent_find(set.names.begin(), set.names.end());
  if (dup != set.names.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, "= lists volume '", *dup, "' more than once"));
  }
  return set;
}

// One non-comment line (already trimmed). Errors carry no file or line: the caller adds them.
absl::StatusOr<Credential> ParseLine(absl::string_view line, int line_no) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  Credential c;
  const absl::string_view first = fields.front();
  if (absl::StartsWith(first, kSanPrefix)) {
    c.kind = Credential::Kind::kSan;
    const absl::string_view san = first.substr(kSanPrefix.size());
    if (san.empty() || san.size() > kMaxSanLength) {
      return absl::InvalidArgumentError(
          absl::StrCat("san: needs a value of 1 to ", kMaxSanLength, " characters"));
    }
    if (int bad = FirstBadByte(san); bad >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a san: value may hold printable ASCII only, without spaces (found byte ", bad, ")"));
    }
    c.value = std::string(san);
    c.label = std::string(first);
  } else {
    if (first.size() < kMinTokenLength || first.size() > kMaxTokenLength) {
      return absl::InvalidArgumentError(
          absl::StrCat("a token must be ", kMinTokenLength, " to ", kMaxTokenLength,
                       " characters long (this one has ", first.size(), ")"));
    }
    if (int bad = FirstBadByte(first); bad >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a token may hold printable ASCII only, without spaces (found byte ", bad, ")"));
    }
    c.value = std::string(first);
    c.label = absl::StrCat("token on line ", line_no);
  }
  bool has_name = false, has_get = false, has_put = false, has_admin = false;
  for (size_t i = 1; i < fields.size(); ++i) {
    const absl::string_view f = fields[i];
    if (f.front() == '#') break;  // a comment to the end of the line
    const size_t eq = f.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field ", i + 1, " is not KEY=VALUE (keys: name, get, put, admin; # starts a comment)"));
    }
    const absl::string_view key = f.substr(0, eq);
    const absl::string_view value = f.substr(eq + 1);
    bool* seen = nullptr;
    if (key == "name") {
      seen = &has_name;
    } else if (key == "get") {
      seen = &has_get;
    } else if (key == "put") {
      seen = &has_put;
    } else if (key == "admin") {
      seen = &has_admin;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("field ", i + 1, ": unknown key",
                       SafeToQuoteKey(key) ? absl::StrCat(" '", key, "'") : std::string(),
                       " (keys: name, get, put, admin)"));
    }
    if (*seen) return absl::InvalidArgumentError(absl::StrCat(key, "= given twice"));
    *seen = true;
    if (key == "name") {
      if (!IsLabelSyntax(value)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "name= must be 1-", kMaxLabelLength, " characters of [A-Za-z0-9_.@:/-]"));
      }
      c.label = std::string(value);
      continue;
    }
    if (key == "admin") {
      if (value != "yes" && value != "no") {
        return absl::InvalidArgumentError("admin= must be yes or no");
      }
      c.admin = value == "yes";
      continue;
    }
    absl::StatusOr<VolumeSet> set = ParseVolumes(key, value);
    if (!set.ok()) return set.status();
    (key == "get" ? c.get : c.put) = *std::move(set);
  }
  if (!has_get && !has_put) {
    c.get.all = true;  // a bare credential: everything, as before grants existed
    c.put.all = true;
  }
  return c;
}

}  // namespace

const char* RightName(Right right) {
  switch (right) {
    case Right::kGet: return "get";
    case Right::kPut: return "put";
  }
  return "?";
}

bool VolumeSet::Contains(absl::string_view volume) const {
  return all || std::binary_search(names.begin(), names.end(), volume);
}

std::string VolumeSet::ToString() const {
  if (all) return "*";
  if (names.empty()) return "none";
  return absl::StrJoin(names, ",");
}

std::string Credential::DescribeGrants() const {
  return absl::StrCat("get ", get.ToString(), "; put ", put.ToString(), admin ? "; admin" : "");
}

absl::StatusOr<std::vector<Credential>> ParseTokenFile(absl::string_view text,
                                                       absl::string_view source) {
  std::vector<Credential> out;
  // Where each token, identity and label was first seen, to refuse repeats naming both lines.
  std::map<std::string, int> tokens, sans, labels;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    absl::StatusOr<Credential> c = ParseLine(line, line_no);
    if (!c.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_no, ": ",
                                                     c.status().message()));
    }
    auto& seen = c->kind == Credential::Kind::kToken ? tokens : sans;
    if (auto [it, fresh] = seen.emplace(c->value, line_no); !fresh) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ":", line_no, ": ",
          c->kind == Credential::Kind::kToken ? std::string("the same token")
                                              : absl::StrCat("the same identity san:", c->value),
          " is already on line ", it->second));
    }
    if (auto [it, fresh] = labels.emplace(c->label, line_no); !fresh) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_no, ": name '", c->label,
                                                     "' is already used on line ", it->second));
    }
    out.push_back(*std::move(c));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": holds no token or identity"));
  }
  return out;
}

absl::StatusOr<std::vector<Credential>> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("token file ", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("token file ", path, ": read failed"));
  return ParseTokenFile(text.str(), path);
}

absl::StatusOr<std::string> ReadClientToken(const std::string& path) {
  absl::StatusOr<std::vector<Credential>> lines = ReadTokenFile(path);
  if (!lines.ok()) return lines.status();
  for (Credential& c : *lines) {
    if (c.kind == Credential::Kind::kToken) return std::move(c.value);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": holds no token (only san: lines, which a client proves with its certificate)"));
}

std::string DescribeCredentials(const std::vector<Credential>& credentials) {
  size_t tokens = 0, sans = 0;
  for (const Credential& c : credentials) ++(c.kind == Credential::Kind::kToken ? tokens : sans);
  std::vector<std::string> parts;
  if (tokens > 0) parts.push_back(absl::StrCat(tokens, tokens == 1 ? " token" : " tokens"));
  if (sans > 0) {
    parts.push_back(absl::StrCat(sans, sans == 1 ? " certificate identity"
                                                 : " certificate identities"));
  }
  return parts.empty() ? std::string("none") : absl::StrJoin(parts, ", ");
}

bool TokenEquals(absl::string_view presented, absl::string_view expected) {
  if (presented.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  }
  return diff == 0;
}

}  // namespace gdr
