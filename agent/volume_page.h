// The agent's GetInfo answers a page of volumes as a daemon does (gdrstore.proto
// GetInfoRequest), from what its daemons (or its cluster) list: one page of a list gathered from
// several sources, in name order, with the cursor to the next.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr::agent {

// Into out->volumes, what `request` asks of `volumes` (any order): nothing for no_volumes, the
// entries named `volume` for one volume, else those named after volumes_after, in name order,
// a page of them (PageEntries, kMaxPageBytes; entries of one name never split). `known_through`
// non-empty: only the names up to it are known (a source's page ended there), so none past it
// is listed and a next page follows. Sets out->next_volumes_after where one does. The request
// must have passed CheckVolumePaging.
void FillVolumePage(std::vector<gdrstore::v1::VolumeInfo> volumes,
                    const gdrstore::v1::GetInfoRequest& request, absl::string_view known_through,
                    gdrstore::v1::GetInfoResponse* out);

// Names a message or a detail line spells out before it counts the rest: it must stay short
// whatever the number of volumes (a status message rides in gRPC's trailing metadata).
inline constexpr size_t kNamesInBrief = 8;

// "a, b, c": `names` (strings, in order) for a line a person reads: at most kNamesInBrief, then
// how many more.
template <typename Names>
std::string NamesInBrief(const Names& names) {
  std::string out;
  size_t n = 0;
  for (const auto& name : names) {
    if (n == kNamesInBrief) {
      absl::StrAppend(&out, " and ", names.size() - kNamesInBrief, " more");
      break;
    }
    absl::StrAppend(&out, n++ == 0 ? "" : ", ", name);
  }
  return out;
}

}  // namespace gdr::agent
