#include "agent/volume_page.h"

#include <algorithm>
#include <utility>

#include "common/wire/list_pages.h"

namespace gdr::agent {

namespace v1 = gdrstore::v1;

void FillVolumePage(std::vector<v1::VolumeInfo> volumes, const v1::GetInfoRequest& request,
                    absl::string_view known_through, v1::GetInfoResponse* out) {
  if (request.no_volumes()) return;
  if (!request.volume().empty()) {
    for (v1::VolumeInfo& v : volumes) {
      if (v.name() == request.volume()) *out->add_volumes() = std::move(v);
    }
    return;
  }
  std::stable_sort(volumes.begin(), volumes.end(),
                   [](const v1::VolumeInfo& a, const v1::VolumeInfo& b) {
                     return a.name() < b.name();
                   });
  const uint32_t page = PageEntries(request.max_volumes());
  size_t bytes = 0;
  for (v1::VolumeInfo& v : volumes) {
    if (v.name() <= request.volumes_after()) continue;
    if (!known_through.empty() && v.name() > known_through) break;
    const int listed = out->volumes_size();
    const size_t size = v.ByteSizeLong();
    // Full: stop, but not between two entries of one name (two daemons serving it), which the
    // cursor could not tell apart.
    if (listed > 0 && out->volumes(listed - 1).name() != v.name() &&
        (static_cast<uint32_t>(listed) >= page || bytes + size > kMaxPageBytes)) {
      out->set_next_volumes_after(out->volumes(listed - 1).name());
      return;
    }
    bytes += size;
    *out->add_volumes() = std::move(v);
  }
  // Every known name is listed; a source has more past them: the next page starts there.
  if (!known_through.empty()) out->set_next_volumes_after(std::string(known_through));
}

}  // namespace gdr::agent
