// The Admin service's fault and volume calls for integration tests, over a channel opened as a client
// opens one (its token), so tests set and read rules the way operators do.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "gdrstore/v1/admin.pb.h"

namespace gdr::integ {

// The RPC's status, as an absl::Status, when the call fails.
absl::StatusOr<gdrstore::v1::FaultState> SetFault(const std::string& address,
                                                  const gdrstore::v1::FaultSpec& spec,
                                                  const std::string& token = "");
// `text` as gdrctl fault set takes it (common/wire/fault_spec.h); INVALID_ARGUMENT when it does not
// parse.
absl::StatusOr<gdrstore::v1::FaultState> SetFault(const std::string& address,
                                                  const std::string& text,
                                                  const std::string& token = "");
absl::StatusOr<gdrstore::v1::ListFaultsResponse> ListFaults(const std::string& address,
                                                            const std::string& token = "");
absl::StatusOr<uint64_t> ClearFaults(const std::string& address,
                                     const gdrstore::v1::ClearFaultsRequest& request,
                                     const std::string& token = "");

absl::StatusOr<gdrstore::v1::CreateVolumeResponse> CreateVolume(
    const std::string& address, const gdrstore::v1::CreateVolumeRequest& request,
    const std::string& token = "");
absl::Status DeleteVolume(const std::string& address, const std::string& name,
                          bool delete_file = false, const std::string& token = "");

}  // namespace gdr::integ
