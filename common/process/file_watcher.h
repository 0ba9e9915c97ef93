// Files a service re-reads when they change while it serves: tokens and TLS files mounted from
// a Kubernetes Secret, which the kubelet replaces without a signal (a new timestamped
// directory, then one rename of the `..data` symlink the files' own symlinks go through).
// inotify on the directories holding the files wakes a thread that re-stats each file through
// its links and reports the ones whose identity or contents changed.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/socket.h"

namespace gdr {

// What stat(2) says of a path through its symlinks: which file it is now and its version. All
// zero (size -1) when it cannot be read.
struct FileStamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = -1;
  timespec mtime{};
  timespec ctime{};
  static FileStamp Of(const std::string& path);
  bool operator==(const FileStamp& o) const;
};

class FileWatcher {
 public:
  // Called on the watcher's thread with the paths (as given) that changed, once per burst of
  // events. It may take its time; events meanwhile are coalesced into the next call.
  using OnChange = std::function<void(const std::vector<std::string>& changed)>;

  // Watches `paths` (empty ones ignored; a file may be missing now and appear later). Errors:
  // the inotify call that failed, naming the directory (e.g. it does not exist).
  static absl::StatusOr<std::unique_ptr<FileWatcher>> Start(std::vector<std::string> paths,
                                                            OnChange on_change);
  // Stops and joins the thread; no call runs after it returns.
  ~FileWatcher();
  FileWatcher(const FileWatcher&) = delete;
  FileWatcher& operator=(const FileWatcher&) = delete;

 private:
  FileWatcher(std::vector<std::string> paths, OnChange on_change, ScopedFd inotify, ScopedFd wake);
  void Run();

  const std::vector<std::string> paths_;
  const OnChange on_change_;
  std::vector<FileStamp> stamps_;  // the watcher thread's only
  ScopedFd inotify_;
  ScopedFd wake_;  // an eventfd the destructor writes to stop the thread
  std::thread thread_;
};

}  // namespace gdr
