// A directory served as volumes (--volume-dir): every regular file under it, named by its path
// relative to the directory ("llama/model-00001-of-00004.safetensors"), so a real checkpoint
// directory can be served as it lies. Read-only unless the directory is given `writable`; a
// writable one is also where volumes made at run time keep their files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/store/served_dir.h"
#include "daemon/store/store.h"

namespace gdr {

struct VolumeDir {
  std::string path;        // absolute, without a trailing '/'
  bool writable = false;   // puts allowed; CreateVolume's files go here
  MediaSettings media;     // every volume of the directory
  // The directory, open: every volume of it is reached through this (served_dir.h). Set by
  // OpenVolumeDir; ScanVolumeDir opens it when unset.
  std::shared_ptr<const ServedDir> handle = nullptr;
};

// "DIR[,writable][,MEDIA OPTION=VALUE...]" (media options as in --volume). INVALID_ARGUMENT
// naming what is wrong: a relative path, an unknown option.
absl::StatusOr<VolumeDir> ParseVolumeDir(absl::string_view text);

// Opens dir->path into dir->handle. NOT_FOUND when it is not a directory; the errno status.
absl::Status OpenVolumeDir(VolumeDir* dir);

// What the directory serves now: one spec per regular file of a valid volume name and nonzero
// size, in name order, at most `max` of them, each reached through the directory's handle.
// Symbolic links are not followed (a link could lead out of the directory). What is skipped is
// named in `skipped` with why: bad names, empty files, a fill's leftover ".partial", links,
// what is neither file nor directory, and a directory that cannot be read (its files are
// missing; the scan goes on with the rest). NOT_FOUND / the errno status when the directory
// itself cannot be read; RESOURCE_EXHAUSTED past `max`.
absl::StatusOr<std::vector<VolumeSpec>> ScanVolumeDir(const VolumeDir& dir, size_t max,
                                                      std::vector<std::string>* skipped);

// The spec of a file volume named `name` (IsValidVolumeName) in `dir`, to be made there: its
// file reached only through the directory's handle. INVALID_ARGUMENT for a bad name.
absl::StatusOr<VolumeSpec> VolumeSpecIn(const VolumeDir& dir, absl::string_view name,
                                        uint64_t size);

// Whether `name` already has a file in `dir` (links and other kinds count). Never follows a link.
bool VolumeFileExists(const VolumeDir& dir, absl::string_view name);

}  // namespace gdr
