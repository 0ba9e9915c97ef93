// gdrctl's fault commands, through the daemon's gdrstore.v1.Admin service: `fault set SPEC`
// (the text of common/wire/fault_spec.h), `fault clear ID...|--all`, `fault list`.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gdrstore/v1/admin.grpc.pb.h"

namespace gdrctl {

// Each returns gdrctl's exit code (0 ok, 1 the daemon refused or failed, 2 a spec that does
// not parse) and prints to `out` (JSON with `json`); errors go to stderr.
int FaultSet(gdrstore::v1::Admin::Stub* stub, const std::string& spec, bool json,
             absl::Duration timeout, std::ostream& out);
int FaultClear(gdrstore::v1::Admin::Stub* stub, const std::vector<uint64_t>& ids, bool all,
               bool json, absl::Duration timeout, std::ostream& out);
int FaultList(gdrstore::v1::Admin::Stub* stub, bool json, absl::Duration timeout,
              std::ostream& out);

}  // namespace gdrctl
