#include "common/base/units.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gdr {

absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  if (digits == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("size '", text, "' must start with a number (e.g. 4KiB, 64MiB, 1GiB)"));
  }
  uint64_t value = 0;
  if (!absl::SimpleAtoi(s.substr(0, digits), &value)) {
    return absl::InvalidArgumentError(absl::StrCat("size '", text, "' is too large"));
  }
  std::string suffix = absl::AsciiStrToLower(absl::StripAsciiWhitespace(s.substr(digits)));
  int shift = 0;
  if (suffix.empty() || suffix == "b") {
    shift = 0;
  } else if (suffix == "k" || suffix == "kb" || suffix == "kib") {
    shift = 10;
  } else if (suffix == "m" || suffix == "mb" || suffix == "mib") {
    shift = 20;
  } else if (suffix == "g" || suffix == "gb" || suffix == "gib") {
    shift = 30;
  } else if (suffix == "t" || suffix == "tb" || suffix == "tib") {
    shift = 40;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("size '", text, "' has unknown unit '", suffix, "' (use B, KiB, MiB, GiB, TiB)"));
  }
  if (shift > 0 && (value >> (64 - shift)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("size '", text, "' overflows 64 bits"));
  }
  return value << shift;
}

std::string FormatSize(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (unit < 4 && bytes != 0 && (bytes & 1023) == 0) {
    bytes >>= 10;
    ++unit;
  }
  return absl::StrCat(bytes, " ", kUnits[unit]);
}

}  // namespace gdr
