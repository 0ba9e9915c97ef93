#include "common/token_file.h"

#include <cerrno>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gdr {

absl::StatusOr<std::vector<std::string>> ParseTokens(absl::string_view text,
                                                     absl::string_view source) {
  std::vector<std::string> tokens;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    if (line.size() < kMinTokenLength || line.size() > kMaxTokenLength) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", line_no, ": a token must be ", kMinTokenLength, " to ",
                       kMaxTokenLength, " characters long (this one has ", line.size(), ")"));
    }
    for (char c : line) {
      if (c < 0x21 || c > 0x7e) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ":", line_no,
            ": a token may hold printable ASCII only, without spaces (found byte ",
            static_cast<int>(static_cast<unsigned char>(c)), ")"));
      }
    }
    tokens.emplace_back(line);
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": holds no token"));
  }
  return tokens;
}

absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("token file ", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("token file ", path, ": read failed"));
  return ParseTokens(text.str(), path);
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
