// Bearer tokens for the gdrstore.v1 service, kept in files: one token per line, blank lines
// and lines starting with '#' ignored, surrounding whitespace trimmed. The daemon accepts every
// token of its file (several allow rotation); a client presents the first of its file.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr {

inline constexpr size_t kMinTokenLength = 16;
inline constexpr size_t kMaxTokenLength = 1024;

// The tokens of `path`, in file order. INVALID_ARGUMENT naming the file and line when a token
// is shorter than kMinTokenLength, longer than kMaxTokenLength or holds a character outside
// printable ASCII (0x21-0x7e), or when the file holds no token; NOT_FOUND / PERMISSION_DENIED
// when it cannot be read. Messages never quote a token.
absl::StatusOr<std::vector<std::string>> ReadTokenFile(const std::string& path);

// Same rules, on text already read; `source` names it in errors.
absl::StatusOr<std::vector<std::string>> ParseTokens(absl::string_view text,
                                                     absl::string_view source);

// Whether `presented` equals `expected`, in time that depends on the lengths only.
bool TokenEquals(absl::string_view presented, absl::string_view expected);

}  // namespace gdr
