// Pages of the lists that GetInfo and GetStats answer (gdrstore.v1.GetInfoRequest,
// GetStatsRequest): how much one answer holds, kept by the daemon and the agent alike, so that an
// answer stays far below gRPC's 4 MiB default message limit however many volumes or sessions
// there are.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gdr {

// List entries in one answer, at most: what a caller asking 0 (or more) gets.
inline constexpr uint32_t kMaxPageEntries = 1000;
// A page also ends once its entries reach this many bytes (a file volume's entry carries its
// path, up to 4 KiB): 1000 entries of the longest names and paths would pass 4 MiB.
inline constexpr size_t kMaxPageBytes = size_t{1} << 20;

// The page size for what a caller asked.
inline uint32_t PageEntries(uint32_t asked) {
  return asked == 0 || asked > kMaxPageEntries ? kMaxPageEntries : asked;
}

// A GetInfoRequest's choice of volumes, checked: INVALID_ARGUMENT naming the field when
// `volumes_after` is longer than any volume name, `volume` is not a volume name, or `volume` or
// `no_volumes` come with another choice.
absl::Status CheckVolumePaging(absl::string_view volumes_after, absl::string_view volume,
                               bool no_volumes);

}  // namespace gdr
