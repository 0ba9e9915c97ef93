#include "common/process/file_watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/base/thread_name.h"

namespace gdr {

bool FileStamp::operator==(const FileStamp& o) const {
  return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
         mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec &&
         ctime.tv_nsec == o.ctime.tv_nsec;
}

FileStamp FileStamp::Of(const std::string& path) {
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return FileStamp{};
  return FileStamp{st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
}

absl::StatusOr<std::unique_ptr<FileWatcher>> FileWatcher::Start(std::vector<std::string> paths,
                                                                OnChange on_change) {
  std::erase_if(paths, [](const std::string& p) { return p.empty(); });
  ScopedFd in(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!in.valid()) return absl::ErrnoToStatus(errno, "inotify_init1");
  ScopedFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return absl::ErrnoToStatus(errno, "eventfd");
  // The directory, not the file: a Secret's files are symlinks that never change themselves;
  // the `..data` rename beside them (IN_MOVED_TO), a file written in place (IN_CLOSE_WRITE) or
  // replaced by rename are all events of the directory.
  std::set<std::string> dirs;
  for (const std::string& p : paths) {
    std::string dir = std::filesystem::path(p).parent_path().string();
    dirs.insert(dir.empty() ? "." : dir);
  }
  for (const std::string& dir : dirs) {
    const uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE |
                          IN_ATTRIB | IN_ONLYDIR;
    if (::inotify_add_watch(in.get(), dir.c_str(), mask) < 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("inotify_add_watch ", dir));
    }
  }
  std::unique_ptr<FileWatcher> w(
      new FileWatcher(std::move(paths), std::move(on_change), std::move(in), std::move(wake)));
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

FileWatcher::FileWatcher(std::vector<std::string> paths, OnChange on_change, ScopedFd inotify,
                         ScopedFd wake)
    : paths_(std::move(paths)),
      on_change_(std::move(on_change)),
      inotify_(std::move(inotify)),
      wake_(std::move(wake)) {
  for (const std::string& p : paths_) stamps_.push_back(FileStamp::Of(p));
}

FileWatcher::~FileWatcher() {
  const uint64_t one = 1;
  if (::write(wake_.get(), &one, sizeof(one)) != sizeof(one)) {
    GDR_LOG(kError) << "file watcher: cannot stop its thread: " << ::strerror(errno);
  }
  if (thread_.joinable()) thread_.join();
}

void FileWatcher::Run() {
  SetThreadName("gdr-filewatch");
  alignas(struct inotify_event) char buf[16 * 1024];
  for (;;) {
    pollfd fds[2] = {{inotify_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      GDR_LOG(kError) << "file watcher: poll: " << ::strerror(errno) << "; files no longer "
                      << "re-read on change (SIGHUP still re-reads them)";
      return;
    }
    if (fds[1].revents != 0) return;
    // Only whether something happened matters: drain the queue, then compare every stamp.
    while (::read(inotify_.get(), buf, sizeof(buf)) > 0) {
    }
    std::vector<std::string> changed;
    for (size_t i = 0; i < paths_.size(); ++i) {
      FileStamp now = FileStamp::Of(paths_[i]);
      if (now == stamps_[i]) continue;
      stamps_[i] = now;
      changed.push_back(paths_[i]);
    }
    if (!changed.empty()) on_change_(changed);
  }
}

}  // namespace gdr
