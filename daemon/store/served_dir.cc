#include "daemon/store/served_dir.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status_macros.h"

namespace gdr {
namespace {

// Set once openat2 answered ENOSYS (an old kernel, or a seccomp filter that predates it).
std::atomic<bool> no_openat2{false};

// The status of a failed open of `shown`, a part of the path below the served directory.
absl::Status OpenError(int err, const std::string& shown, absl::string_view what) {
  if (err == ELOOP || err == ENOTDIR || err == EXDEV) {
    return absl::FailedPreconditionError(absl::StrCat(
        shown, " is a symbolic link or not a directory: ", what, " would not lie beneath the "
        "served directory"));
  }
  return absl::ErrnoToStatus(err, absl::StrCat("open ", shown));
}

}  // namespace

int OpenBeneath(int dirfd, const std::string& segment, int flags, mode_t mode) {
  flags |= O_CLOEXEC | O_NOFOLLOW;
  if (!no_openat2.load(std::memory_order_relaxed)) {
    struct open_how how {};
    how.flags = static_cast<uint64_t>(flags);
    how.mode = (flags & O_CREAT) ? mode : 0;  // openat2 refuses a mode it would not use
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    const long fd = ::syscall(SYS_openat2, dirfd, segment.c_str(), &how, sizeof(how));
    if (fd >= 0 || errno != ENOSYS) return static_cast<int>(fd);
    no_openat2.store(true, std::memory_order_relaxed);
  }
  // One segment (no '/', never "." or ".."): O_NOFOLLOW refuses a link as the openat2 flags do.
  if (segment.find('/') != std::string::npos || segment == "." || segment == "..") {
    errno = EXDEV;
    return -1;
  }
  return ::openat(dirfd, segment.c_str(), flags, mode);
}

absl::string_view LastSegment(absl::string_view name) {
  const size_t slash = name.rfind('/');
  return slash == absl::string_view::npos ? name : name.substr(slash + 1);
}

absl::StatusOr<std::shared_ptr<const ServedDir>> ServedDir::Open(const std::string& path) {
  // The operator's path itself may pass through links (/srv -> /data/srv); only what lies
  // beneath it is held to the directory.
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) {
      return absl::NotFoundError(
          absl::StrCat(path, " is not a directory (", std::strerror(errno), ")"));
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  }
  return std::shared_ptr<const ServedDir>(new ServedDir(path, std::move(fd)));
}

std::string ServedDir::Shown(absl::string_view name) const {
  return name.empty() ? path_ : absl::StrCat(path_, "/", name);
}

absl::StatusOr<ScopedFd> ServedDir::Dup() const {
  ScopedFd dir(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
  if (!dir.valid()) return absl::ErrnoToStatus(errno, "dup " + path_);
  return dir;
}

absl::StatusOr<ScopedFd> ServedDir::OpenParent(absl::string_view name,
                                               std::vector<Made>* made) const {
  GDR_ASSIGN_OR_RETURN(ScopedFd dir, Dup());
  std::vector<absl::string_view> segs = absl::StrSplit(name, '/');
  std::string so_far;
  for (size_t i = 0; i + 1 < segs.size(); ++i) {
    const std::string seg(segs[i]);
    absl::StrAppend(&so_far, so_far.empty() ? "" : "/", seg);
    ScopedFd next(OpenBeneath(dir.get(), seg, O_RDONLY | O_DIRECTORY));
    if (!next.valid() && errno == ENOENT && made != nullptr) {
      // Made relative to the descriptor just opened, so it lands where that directory is now.
      if (::mkdirat(dir.get(), seg.c_str(), 0750) == 0) {
        ScopedFd parent(::fcntl(dir.get(), F_DUPFD_CLOEXEC, 0));
        made->push_back(Made{std::move(parent), seg});
      } else if (errno != EEXIST) {
        return absl::ErrnoToStatus(errno, absl::StrCat("mkdir ", Shown(so_far)));
      }
      next = ScopedFd(OpenBeneath(dir.get(), seg, O_RDONLY | O_DIRECTORY));
    }
    if (!next.valid()) {
      return OpenError(errno, Shown(so_far), absl::StrCat("volume '", name, "'"));
    }
    dir = std::move(next);
  }
  return dir;
}

void ServedDir::RemoveMade(std::vector<Made>* made) {
  for (auto it = made->rbegin(); it != made->rend(); ++it) {
    if (it->parent.valid()) ::unlinkat(it->parent.get(), it->name.c_str(), AT_REMOVEDIR);
  }
  made->clear();
}

}  // namespace gdr
