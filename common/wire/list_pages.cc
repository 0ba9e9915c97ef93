#include "common/wire/list_pages.h"

#include "absl/strings/str_cat.h"
#include "common/wire/volume_name.h"

namespace gdr {

absl::Status CheckVolumePaging(absl::string_view volumes_after, absl::string_view volume,
                               bool no_volumes) {
  if (volumes_after.size() > kMaxVolumeName) {
    return absl::InvalidArgumentError(
        absl::StrCat("GetInfo volumes_after: ", volumes_after.size(),
                     " bytes, longer than any volume name (", kMaxVolumeName, ")"));
  }
  if (!volume.empty() && !IsVolumeNameSyntax(volume)) {
    return absl::InvalidArgumentError(absl::StrCat("GetInfo volume '", ShownVolumeName(volume),
                                                   "' is not a volume name (", kVolumeNameRule,
                                                   ")"));
  }
  if (!volume.empty() && (!volumes_after.empty() || no_volumes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GetInfo volume asks for one volume: it does not go with ",
        no_volumes ? "no_volumes" : "volumes_after"));
  }
  if (no_volumes && !volumes_after.empty()) {
    return absl::InvalidArgumentError("GetInfo no_volumes does not go with volumes_after");
  }
  return absl::OkStatus();
}

}  // namespace gdr
