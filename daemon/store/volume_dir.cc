#include "daemon/store/volume_dir.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"

namespace gdr {

namespace fs = std::filesystem;

absl::StatusOr<VolumeDir> ParseVolumeDir(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, ',');
  VolumeDir dir;
  dir.path = std::string(parts[0]);
  while (dir.path.size() > 1 && dir.path.back() == '/') dir.path.pop_back();
  if (dir.path.empty() || dir.path.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("--volume-dir '", parts[0], "' must be an absolute path"));
  }
  std::vector<std::string> media;
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i] == "writable") {
      dir.writable = true;
    } else {
      media.emplace_back(parts[i]);
    }
  }
  absl::StatusOr<MediaSettings> m =
      ParseMediaOptions("volume-dir", absl::StrJoin(media, ","));
  if (!m.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--volume-dir ", dir.path, ": ",
                                                   m.status().message(),
                                                   " (options: writable, media options)"));
  }
  dir.media = *m;
  return dir;
}

absl::StatusOr<std::vector<VolumeSpec>> ScanVolumeDir(const VolumeDir& dir, size_t max,
                                                      std::vector<std::string>* skipped) {
  std::error_code ec;
  if (!fs::is_directory(dir.path, ec)) {
    return absl::NotFoundError(absl::StrCat("--volume-dir ", dir.path, " is not a directory",
                                            ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  }
  std::vector<VolumeSpec> specs;
  // Links, to files or directories, are listed but never followed.
  fs::recursive_directory_iterator it(dir.path, fs::directory_options::none, ec);
  if (ec) {
    return absl::ErrnoToStatus(ec.value(), absl::StrCat("--volume-dir ", dir.path, ": read"));
  }
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) {
      return absl::ErrnoToStatus(ec.value(), absl::StrCat("--volume-dir ", dir.path, ": read"));
    }
    const fs::directory_entry& e = *it;
    const std::string name = e.path().lexically_relative(dir.path).generic_string();
    if (e.is_symlink(ec)) {
      skipped->push_back(absl::StrCat(name, ": a symbolic link (not followed)"));
      continue;
    }
    if (!e.is_regular_file(ec)) continue;  // directories are walked; others skipped silently
    if (absl::EndsWith(name, ".partial")) {
      skipped->push_back(absl::StrCat(name, ": a fill's leftover (.partial)"));
      continue;
    }
    if (!IsValidVolumeName(name)) {
      skipped->push_back(absl::StrCat(name, ": not a volume name (", kVolumeNameRule, ")"));
      continue;
    }
    const uintmax_t size = e.file_size(ec);
    if (ec || size == 0) {
      skipped->push_back(absl::StrCat(name, ec ? absl::StrCat(": ", ec.message()) : ": empty"));
      continue;
    }
    if (specs.size() == max) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "--volume-dir ", dir.path, " holds more than ", max, " files (--max-volumes)"));
    }
    VolumeSpec spec;
    spec.name = name;
    spec.size = size;
    spec.file = e.path().string();
    spec.media = dir.media;
    spec.read_only = !dir.writable;
    specs.push_back(std::move(spec));
  }
  std::sort(specs.begin(), specs.end(),
            [](const VolumeSpec& a, const VolumeSpec& b) { return a.name < b.name; });
  return specs;
}

absl::StatusOr<std::string> VolumeFileIn(const VolumeDir& dir, absl::string_view name,
                                         bool make_parents) {
  if (!IsValidVolumeName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume name '", name.substr(0, kMaxVolumeName), "' must be ",
                     kVolumeNameRule));
  }
  std::string path = dir.path;
  std::vector<absl::string_view> segments = absl::StrSplit(name, '/');
  for (size_t i = 0; i + 1 < segments.size(); ++i) {
    absl::StrAppend(&path, "/", segments[i]);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return absl::FailedPreconditionError(absl::StrCat(
            path, " is not a directory (", S_ISLNK(st.st_mode) ? "a symbolic link" : "a file",
            "): volume '", name, "' would not lie under ", dir.path));
      }
      continue;
    }
    if (errno != ENOENT) return absl::ErrnoToStatus(errno, absl::StrCat("stat ", path));
    if (!make_parents) continue;  // nothing below a missing directory can be a link
    if (::mkdir(path.c_str(), 0750) != 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", path));
    }
  }
  absl::StrAppend(&path, "/", segments.back());
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is a symbolic link: volume '", name, "' is not made through it"));
  }
  return path;
}

}  // namespace gdr
