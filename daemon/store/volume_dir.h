// A directory served as volumes (--volume-dir): every regular file under it, named by its path
// relative to the directory ("llama/model-00001-of-00004.safetensors"), so a real checkpoint
// directory can be served as it lies. Read-only unless the directory is given `writable`; a
// writable one is also where volumes made at run time keep their files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/store/store.h"

namespace gdr {

struct VolumeDir {
  std::string path;        // absolute, without a trailing '/'
  bool writable = false;   // puts allowed; CreateVolume's files go here
  MediaSettings media;     // every volume of the directory
};

// "DIR[,writable][,MEDIA OPTION=VALUE...]" (media options as in --volume). INVALID_ARGUMENT
// naming what is wrong: a relative path, an unknown option.
absl::StatusOr<VolumeDir> ParseVolumeDir(absl::string_view text);

// What the directory serves now: one spec per regular file of a valid volume name and nonzero
// size, in name order, at most `max` of them. Symbolic links are not followed (a link could
// lead out of the directory); files skipped (bad names, empty files, a fill's leftover
// ".partial", links) are named in `skipped` with why. NOT_FOUND / the errno status when the
// directory cannot be read; RESOURCE_EXHAUSTED past `max`.
absl::StatusOr<std::vector<VolumeSpec>> ScanVolumeDir(const VolumeDir& dir, size_t max,
                                                      std::vector<std::string>* skipped);

// The file a volume named `name` (IsValidVolumeName) has under `dir`: DIR/NAME. Its missing
// parent directories are made (mode 0750) when `make_parents`, else only checked. FAILED_PRECONDITION when a part of the
// path below DIR is a symbolic link or not a directory (a volume never lands outside DIR).
absl::StatusOr<std::string> VolumeFileIn(const VolumeDir& dir, absl::string_view name,
                                         bool make_parents);

}  // namespace gdr
