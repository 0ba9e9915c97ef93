// gdrstored's fault flags: --fault SPEC (repeatable; config-file key `fault`, re-read on
// SIGHUP) and --fault-seed N (the seed rules derive theirs from; a restart changes it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gdrstore/v1/admin.pb.h"

namespace CLI {
class App;
}

namespace gdr {

struct FaultSettings {
  std::vector<std::string> texts;  // as given
  std::vector<gdrstore::v1::FaultSpec> specs;  // parsed by CheckFaultFlags
  uint64_t seed = 1;
};

void AddFaultFlags(CLI::App& app, FaultSettings* values);

// Parses every --fault into `specs`; INVALID_ARGUMENT naming the flag, the rule and the field.
absl::Status CheckFaultFlags(FaultSettings* values);

}  // namespace gdr
