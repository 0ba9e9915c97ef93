// The one rule for a volume's name, shared by the store (flags, --volume-dir files, volumes
// made at run time) and the token file's grants: a name is also a safe relative path.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace gdr {

inline constexpr size_t kMaxVolumeName = 255;
inline constexpr char kVolumeNameRule[] =
    "1..255 characters: segments of [A-Za-z0-9_.-] joined by '/', none empty, '.' or '..'";

// Whether `name` follows kVolumeNameRule.
bool IsVolumeNameSyntax(absl::string_view name);

// What a caller sent as a volume name, as an error may quote it: its first 64 bytes, each one
// outside printable ASCII shown as '?'.
std::string ShownVolumeName(absl::string_view name);

}  // namespace gdr
