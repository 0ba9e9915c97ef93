// Fuzzes the fault rule text (common/wire/fault_spec.h), which gdrctl sends and --fault and the
// config file give the daemon. Properties: it never crashes; a refusal is INVALID_ARGUMENT
// naming a field ("fault FIELD: ..."); an accepted rule passes CheckFaultSpec (what the daemon
// applies to rules from the network), and its printed form parses to the same rule.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "common/wire/fault_spec.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<gdrstore::v1::FaultSpec> spec = gdr::ParseFaultSpec(text);
  if (!spec.ok()) {
    GDR_FUZZ_CHECK(absl::IsInvalidArgument(spec.status()));
    GDR_FUZZ_CHECK(absl::StartsWith(spec.status().message(), "fault "));
    return 0;
  }
  GDR_FUZZ_CHECK(gdr::CheckFaultSpec(*spec).ok());
  const std::string printed = gdr::FormatFaultSpec(*spec);
  absl::StatusOr<gdrstore::v1::FaultSpec> again = gdr::ParseFaultSpec(printed);
  GDR_FUZZ_CHECK(again.ok());
  GDR_FUZZ_CHECK(again->SerializeAsString() == spec->SerializeAsString());
  return 0;
}
