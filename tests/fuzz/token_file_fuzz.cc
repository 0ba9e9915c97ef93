// Fuzzes the credential file parser (common/wire/token_file.h ParseTokenFile, and ReadClientToken on
// the same bytes written to a file): the file is the daemon's and the client's, read at start
// and on every SIGHUP. Properties:
// - Errors never quote a token: the text with every token (a line's first field, not san:)
//   replaced by another of the same length, its non-printable bytes kept and distinct tokens
//   kept distinct, gets the same answer, message included; so does a valid file, tokens aside.
// - Every credential obeys the documented rules: token length and characters, san: value,
//   label syntax; labels, tokens and identities unique; a grant is `*` with no names beside it
//   or names that are valid volume names, sorted and unique; a bare line may do everything.
// - The credentials written back one per line (name=, get=, put=) parse to the same list.
// - ReadClientToken gives the first token, or an error when there is none.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/wire/token_file.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using gdr::Credential;
using gdr::VolumeSet;

bool Printable(char c) { return c >= 0x21 && c <= 0x7e; }

// `text` with each line's token replaced as the header says. The parser splits lines on '\n',
// trims ASCII whitespace, skips blank and '#' lines, and splits fields on ' ' and '\t'.
std::string MaskTokens(absl::string_view text) {
  std::string out(text);
  std::map<std::string, uint64_t> ids;  // distinct tokens get distinct replacements
  size_t start = 0;
  while (start <= out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    absl::string_view line =
        absl::StripAsciiWhitespace(absl::string_view(out).substr(start, end - start));
    if (!line.empty() && line.front() != '#') {
      const absl::string_view first = line.substr(0, line.find_first_of(" \t"));
      if (!absl::StartsWith(first, gdr::kSanPrefix)) {
        const size_t at = static_cast<size_t>(first.data() - out.data());
        uint64_t id = ids.emplace(std::string(first), ids.size()).first->second;
        for (size_t i = 0; i < first.size(); ++i) {
          char& c = out[at + i];
          if (!Printable(c)) continue;
          // Capital letters: never '#', never "san:"; base 26 digits of the id, then 'Q's.
          c = static_cast<char>('A' + id % 26);
          id /= 26;
        }
      }
    }
    start = end + 1;
  }
  return out;
}

void CheckVolumes(const VolumeSet& set) {
  if (set.all) {
    GDR_FUZZ_CHECK(set.names.empty());
    GDR_FUZZ_CHECK(set.ToString() == "*");
    GDR_FUZZ_CHECK(set.Contains("anything"));
    return;
  }
  for (size_t i = 0; i < set.names.size(); ++i) {
    GDR_FUZZ_CHECK(gdr::IsVolumeNameSyntax(set.names[i]));
    GDR_FUZZ_CHECK(set.names[i] != "*");
    GDR_FUZZ_CHECK(i == 0 || set.names[i - 1] < set.names[i]);
    GDR_FUZZ_CHECK(set.Contains(set.names[i]));
  }
  GDR_FUZZ_CHECK(!set.Contains("*"));
}

void CheckCredential(const Credential& c) {
  // name= labels are 1-64 characters; the default one of an identity is san:<value>.
  GDR_FUZZ_CHECK(!c.label.empty());
  GDR_FUZZ_CHECK(c.label.size() <= 64 ||
                 (c.kind == Credential::Kind::kSan && c.label == absl::StrCat("san:", c.value)));
  if (c.kind == Credential::Kind::kToken) {
    GDR_FUZZ_CHECK(c.value.size() >= gdr::kMinTokenLength &&
                   c.value.size() <= gdr::kMaxTokenLength);
    GDR_FUZZ_CHECK(c.value.front() != '#' && !absl::StartsWith(c.value, gdr::kSanPrefix));
    GDR_FUZZ_CHECK(gdr::TokenEquals(c.value, c.value));
  } else {
    GDR_FUZZ_CHECK(!c.value.empty() && c.value.size() <= 1024);
  }
  for (char ch : c.value) GDR_FUZZ_CHECK(Printable(ch));
  if (!absl::StartsWith(c.label, "token on line ")) {
    for (char ch : c.label) GDR_FUZZ_CHECK(Printable(ch));
  }
  CheckVolumes(c.get);
  CheckVolumes(c.put);
  // A line grants something: a bare one everything, one naming get= or put= a nonempty set.
  GDR_FUZZ_CHECK(!c.get.empty() || !c.put.empty());
  GDR_FUZZ_CHECK(!c.DescribeGrants().empty());
}

// One line per credential that parses back to it; labels the parser makes up are left out.
std::string WriteBack(const std::vector<Credential>& creds, std::vector<Credential>* expected) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < creds.size(); ++i) {
    Credential c = creds[i];
    const bool token = c.kind == Credential::Kind::kToken;
    std::string line = token ? c.value : absl::StrCat(gdr::kSanPrefix, c.value);
    if (token && absl::StartsWith(c.label, "token on line ")) {
      c.label = absl::StrCat("token on line ", i + 1);
    } else if (c.label != absl::StrCat(gdr::kSanPrefix, c.value) || token) {
      absl::StrAppend(&line, " name=", c.label);
    }
    if (!(c.get.all && c.put.all)) {
      if (!c.get.empty()) absl::StrAppend(&line, " get=", c.get.ToString());
      if (!c.put.empty()) absl::StrAppend(&line, " put=", c.put.ToString());
    }
    lines.push_back(line);
    expected->push_back(c);
  }
  return absl::StrJoin(lines, "\n");
}

void CheckClientToken(absl::string_view text,
                      const absl::StatusOr<std::vector<Credential>>& parsed) {
  static const std::string path =
      absl::StrCat(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", "/token_file_fuzz.", getpid());
  FILE* f = std::fopen(path.c_str(), "wb");
  GDR_FUZZ_CHECK(f != nullptr);
  GDR_FUZZ_CHECK(std::fwrite(text.data(), 1, text.size(), f) == text.size());
  GDR_FUZZ_CHECK(std::fclose(f) == 0);
  absl::StatusOr<std::string> token = gdr::ReadClientToken(path);
  const Credential* first = nullptr;
  if (parsed.ok()) {
    for (const Credential& c : *parsed) {
      if (c.kind == Credential::Kind::kToken) {
        first = &c;
        break;
      }
    }
  }
  GDR_FUZZ_CHECK(token.ok() == (first != nullptr));
  if (first != nullptr) {
    GDR_FUZZ_CHECK(*token == first->value);
  } else {
    GDR_FUZZ_CHECK(absl::IsInvalidArgument(token.status()));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<Credential>> creds = gdr::ParseTokenFile(text, "fuzz");
  absl::StatusOr<std::vector<Credential>> masked = gdr::ParseTokenFile(MaskTokens(text), "fuzz");
  GDR_FUZZ_CHECK(masked.status() == creds.status());
  CheckClientToken(text, creds);
  if (!creds.ok()) {
    GDR_FUZZ_CHECK(absl::IsInvalidArgument(creds.status()));
    return 0;
  }
  GDR_FUZZ_CHECK(!creds->empty() && masked->size() == creds->size());
  GDR_FUZZ_CHECK(gdr::DescribeCredentials(*creds) != "none");
  std::set<std::string> labels, tokens, sans;
  for (size_t i = 0; i < creds->size(); ++i) {
    const Credential& c = (*creds)[i];
    CheckCredential(c);
    GDR_FUZZ_CHECK(labels.insert(c.label).second);
    GDR_FUZZ_CHECK((c.kind == Credential::Kind::kToken ? tokens : sans).insert(c.value).second);
    Credential m = (*masked)[i];
    GDR_FUZZ_CHECK(m.kind == c.kind);
    if (c.kind == Credential::Kind::kToken) m.value = c.value;
    GDR_FUZZ_CHECK(m == c);
  }
  std::vector<Credential> expected;
  const std::string again_text = WriteBack(*creds, &expected);
  absl::StatusOr<std::vector<Credential>> again = gdr::ParseTokenFile(again_text, "again");
  GDR_FUZZ_CHECK(again.ok() && *again == expected);
  return 0;
}
