// A directory the daemon serves volumes from (--volume-dir), held open by one descriptor. Every
// name beneath it (from a request or a directory scan) is opened, made, renamed and unlinked
// relative to a directory descriptor that was itself opened beneath it without following a
// symbolic link, so no link, or directory swapped for one between a check and its use, can lead
// an operation outside the directory.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/base/socket.h"

namespace gdr {

class ServedDir {
 public:
  // Opens `path` (absolute) as the directory. NOT_FOUND / FAILED_PRECONDITION naming the path
  // when it is missing or not a directory; the errno status otherwise.
  static absl::StatusOr<std::shared_ptr<const ServedDir>> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // The directory's own descriptor (O_DIRECTORY, read), valid as long as this object.
  int fd() const { return fd_.get(); }

  // A descriptor of its own for the directory (a scan's fdopendir takes it over).
  absl::StatusOr<ScopedFd> Dup() const;

  // The directory that holds the last segment of `name` (a volume name), each part of its path
  // opened beneath the one before, none of them a symbolic link: FAILED_PRECONDITION naming the
  // part that is a link or not a directory; the errno status (PERMISSION_DENIED for an
  // unreadable one) otherwise. With `made` given, missing directories are made (mode 0750) and each one made is
  // appended to `made` (for RemoveMade to undo); without it a missing one is NOT_FOUND.
  struct Made {
    ScopedFd parent;
    std::string name;
  };
  absl::StatusOr<ScopedFd> OpenParent(absl::string_view name, std::vector<Made>* made) const;
  // Removes the directories OpenParent made, newest first, where they are still empty: a
  // create that failed leaves nothing behind.
  static void RemoveMade(std::vector<Made>* made);

  // The path a person reads for `name`: DIR/NAME (never used to reach the file).
  std::string Shown(absl::string_view name) const;

 private:
  ServedDir(std::string path, ScopedFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  std::string path_;
  ScopedFd fd_;
};

// openat(2) of one segment under `dirfd` that never follows a symbolic link and never leaves
// `dirfd`: openat2 with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, or, where the kernel or a
// container's seccomp filter has no openat2, openat with O_NOFOLLOW (a segment holds no '/').
// -1 with errno set on failure (ELOOP: a link).
int OpenBeneath(int dirfd, const std::string& segment, int flags, mode_t mode = 0);

// The last segment of a volume name ("c" of "a/b/c").
absl::string_view LastSegment(absl::string_view name);

}  // namespace gdr
