#include "daemon/store/volume_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"

namespace gdr {

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

absl::Status OpenVolumeDir(VolumeDir* dir) {
  absl::StatusOr<std::shared_ptr<const ServedDir>> handle = ServedDir::Open(dir->path);
  if (!handle.ok()) {
    return absl::Status(handle.status().code(),
                        absl::StrCat("--volume-dir ", handle.status().message()));
  }
  dir->handle = *std::move(handle);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<VolumeSpec>> ScanVolumeDir(const VolumeDir& given, size_t max,
                                                      std::vector<std::string>* skipped) {
  VolumeDir dir = given;
  if (dir.handle == nullptr) GDR_RETURN_IF_ERROR(OpenVolumeDir(&dir));
  struct Pending {
    ScopedFd fd;
    std::string rel;  // "" for the directory itself
  };
  std::vector<Pending> pending;
  GDR_ASSIGN_OR_RETURN(ScopedFd root, dir.handle->Dup());
  pending.push_back(Pending{std::move(root), ""});
  std::vector<VolumeSpec> specs;
  // Each directory is read through a descriptor opened beneath its parent's without following
  // a link, so what is listed and sized is what lies beneath the served directory now.
  while (!pending.empty()) {
    Pending p = std::move(pending.back());
    pending.pop_back();
    const std::string shown_dir = p.rel.empty() ? "" : absl::StrCat(p.rel, "/");
    DIR* d = ::fdopendir(p.fd.get());
    if (d == nullptr) {
      if (p.rel.empty()) return absl::ErrnoToStatus(errno, "--volume-dir " + dir.path + ": read");
      skipped->push_back(absl::StrCat(shown_dir, ": cannot be read (", std::strerror(errno),
                                      "); the files beneath it are not served"));
      continue;
    }
    p.fd.Release();  // closedir closes it
    auto close = absl::MakeCleanup([d] { ::closedir(d); });
    for (;;) {
      errno = 0;
      const struct dirent* e = ::readdir(d);
      if (e == nullptr) {
        if (errno != 0) {
          skipped->push_back(absl::StrCat(shown_dir.empty() ? "." : shown_dir,
                                          ": reading it stopped (", std::strerror(errno),
                                          "); some of its files may not be served"));
        }
        break;
      }
      const std::string seg = e->d_name;
      if (seg == "." || seg == "..") continue;
      const std::string name = shown_dir + seg;
      struct stat st {};
      if (::fstatat(::dirfd(d), seg.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        skipped->push_back(absl::StrCat(name, ": ", std::strerror(errno)));
        continue;
      }
      if (S_ISLNK(st.st_mode)) {
        skipped->push_back(absl::StrCat(name, ": a symbolic link (not followed)"));
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        if (name.size() >= kMaxVolumeName) {
          skipped->push_back(absl::StrCat(name.substr(0, 64), "...: a directory too deep for "
                                          "any volume name beneath it (", kVolumeNameRule, ")"));
          continue;
        }
        ScopedFd sub(OpenBeneath(::dirfd(d), seg, O_RDONLY | O_DIRECTORY));
        if (!sub.valid()) {
          // An unreadable directory (lost+found of another owner) hides only its own files.
          skipped->push_back(absl::StrCat(name, "/: cannot be read (", std::strerror(errno),
                                          "); the files beneath it are not served"));
          continue;
        }
        pending.push_back(Pending{std::move(sub), name});
        continue;
      }
      if (!S_ISREG(st.st_mode)) {
        skipped->push_back(absl::StrCat(name, ": not a regular file"));
        continue;
      }
      if (absl::EndsWith(name, ".partial")) {
        skipped->push_back(absl::StrCat(name, ": a fill's leftover (.partial)"));
        continue;
      }
      if (!IsValidVolumeName(name)) {
        skipped->push_back(absl::StrCat(ShownVolumeName(name), ": not a volume name (",
                                        kVolumeNameRule, ")"));
        continue;
      }
      if (st.st_size == 0) {
        skipped->push_back(absl::StrCat(name, ": empty"));
        continue;
      }
      if (specs.size() == max) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "--volume-dir ", dir.path, " holds more than ", max, " files (--max-volumes)"));
      }
      VolumeSpec spec;
      spec.name = name;
      spec.size = static_cast<uint64_t>(st.st_size);
      spec.file = dir.handle->Shown(name);
      spec.dir = dir.handle;
      spec.media = dir.media;
      spec.read_only = !dir.writable;
      specs.push_back(std::move(spec));
    }
  }
  std::sort(specs.begin(), specs.end(),
            [](const VolumeSpec& a, const VolumeSpec& b) { return a.name < b.name; });
  return specs;
}

absl::StatusOr<VolumeSpec> VolumeSpecIn(const VolumeDir& dir, absl::string_view name,
                                        uint64_t size) {
  if (!IsValidVolumeName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume name '", ShownVolumeName(name), "' must be ", kVolumeNameRule));
  }
  VolumeSpec spec;
  spec.name = std::string(name);
  spec.size = size;
  spec.dir = dir.handle;
  if (spec.dir == nullptr) {
    GDR_ASSIGN_OR_RETURN(spec.dir, ServedDir::Open(dir.path));
  }
  spec.file = spec.dir->Shown(name);
  spec.media = dir.media;
  return spec;
}

bool VolumeFileExists(const VolumeDir& dir, absl::string_view name) {
  if (dir.handle == nullptr) return false;
  absl::StatusOr<ScopedFd> parent = dir.handle->OpenParent(name, nullptr);
  if (!parent.ok()) return !absl::IsNotFound(parent.status());
  struct stat st {};
  return ::fstatat(parent->get(), std::string(LastSegment(name)).c_str(), &st,
                   AT_SYMLINK_NOFOLLOW) == 0;
}

}  // namespace gdr
