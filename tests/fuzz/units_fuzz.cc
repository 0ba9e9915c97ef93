// Fuzzes the size parser (common/base/units.h), which reads sizes from flags, config files and
// volume specs. Properties: it never crashes; what it accepts, FormatSize prints back to text
// that parses to the same value, and the unit suffix is case-insensitive. The first 8 bytes,
// read as a number, also go through FormatSize -> ParseSize, which must give them back.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "common/base/units.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<uint64_t> v = gdr::ParseSize(text);
  if (v.ok()) {
    absl::StatusOr<uint64_t> again = gdr::ParseSize(gdr::FormatSize(*v));
    GDR_FUZZ_CHECK(again.ok() && *again == *v);
    absl::StatusOr<uint64_t> upper = gdr::ParseSize(absl::AsciiStrToUpper(text));
    GDR_FUZZ_CHECK(upper.ok() && *upper == *v);
  } else {
    GDR_FUZZ_CHECK(absl::IsInvalidArgument(v.status()));
  }
  if (size >= sizeof(uint64_t)) {
    uint64_t n;
    std::memcpy(&n, data, sizeof(n));
    const std::string printed = gdr::FormatSize(n);
    absl::StatusOr<uint64_t> back = gdr::ParseSize(printed);
    GDR_FUZZ_CHECK(back.ok() && *back == n);
  }
  return 0;
}
