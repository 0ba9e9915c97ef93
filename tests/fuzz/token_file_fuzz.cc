// Fuzzes the bearer-token file parser (common/token_file.h ParseTokens): the file is the
// daemon's and the client's, read at start and on every SIGHUP. Properties: it never crashes;
// an error message does not depend on what the tokens say (it never quotes one); every token
// it returns obeys the documented rules (length, printable ASCII, no comment), and the tokens
// written back one per line parse to the same list.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/token_file.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<std::vector<std::string>> tokens = gdr::ParseTokens(text, "fuzz");
  // Errors never quote a token: the same text with every token character replaced by another
  // one (the bytes that make a line valid or not kept) gets the same answer.
  std::string masked(text);
  for (char& c : masked) {
    if (c >= 0x21 && c <= 0x7e && c != '#') c = 'x';
  }
  absl::StatusOr<std::vector<std::string>> masked_tokens = gdr::ParseTokens(masked, "fuzz");
  GDR_FUZZ_CHECK(masked_tokens.status() == tokens.status());
  if (!tokens.ok()) {
    GDR_FUZZ_CHECK(absl::IsInvalidArgument(tokens.status()));
    return 0;
  }
  GDR_FUZZ_CHECK(masked_tokens->size() == tokens->size());
  GDR_FUZZ_CHECK(!tokens->empty());
  for (const std::string& t : *tokens) {
    GDR_FUZZ_CHECK(t.size() >= gdr::kMinTokenLength && t.size() <= gdr::kMaxTokenLength);
    GDR_FUZZ_CHECK(t.front() != '#');
    for (char c : t) GDR_FUZZ_CHECK(c >= 0x21 && c <= 0x7e);
    GDR_FUZZ_CHECK(gdr::TokenEquals(t, t));
  }
  absl::StatusOr<std::vector<std::string>> again =
      gdr::ParseTokens(absl::StrJoin(*tokens, "\n"), "again");
  GDR_FUZZ_CHECK(again.ok() && *again == *tokens);
  return 0;
}
