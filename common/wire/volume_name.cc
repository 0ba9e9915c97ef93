#include "common/wire/volume_name.h"

#include "absl/strings/str_split.h"

namespace gdr {

bool IsVolumeNameSyntax(absl::string_view name) {
  if (name.empty() || name.size() > kMaxVolumeName) return false;
  for (absl::string_view segment : absl::StrSplit(name, '/')) {
    if (segment.empty() || segment == "." || segment == "..") return false;
    for (char c : segment) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
      if (!ok) return false;
    }
  }
  return true;
}

std::string ShownVolumeName(absl::string_view name) {
  std::string shown(name.substr(0, 64));
  for (char& c : shown) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return shown;
}

}  // namespace gdr
