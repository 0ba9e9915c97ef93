// The test suites' process harness: scratch directories, child processes started with
// posix_spawn and ended only by PID (a sanitizer report of a child fails the running test), a
// run-to-completion helper and a poll loop. Shared by the integration suite and the tests that
// run other real servers (etcd).
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gdr::integ {

// A scratch directory under $TMPDIR (or /tmp, or a base the caller names), removed with its
// files on destruction.
class TempDir {
 public:
  // Under `base`; empty: $TMPDIR, else /tmp.
  static absl::StatusOr<std::unique_ptr<TempDir>> Create(const std::string& prefix,
                                                         const std::string& base = "");
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// One spawned child. The destructor SIGKILLs and reaps it if it is still running, so a failed
// test never leaves a process behind. Not thread-safe.
//
// Sanitized builds (GDR_SANITIZE): the child's ASAN/UBSAN/TSAN_OPTIONS get a log_path of its
// own; once the child is reaped, any report it (or a process it forked) wrote there fails the
// running test with the report's text. A finding in the daemon or gdrctl therefore fails the
// test that started it instead of sitting in a log nobody reads. Unsanitized binaries ignore
// the variables.
class ChildProcess {
 public:
  // Spawns argv[0] (a path) with stdout and stderr redirected to the given files (truncated),
  // stdin from /dev/null. INTERNAL with the errno text when posix_spawn fails.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::vector<std::string>& argv,
                                                             const std::string& stdout_path,
                                                             const std::string& stderr_path);
  // Same, with `extra_env` ("NAME=value") added to (or replacing in) this process's environment.
  // `pass_fd` >= 0: the child gets that descriptor as its fd 3 (every other is closed).
  static absl::StatusOr<std::unique_ptr<ChildProcess>> SpawnWithEnv(
      const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
      const std::string& stdout_path, const std::string& stderr_path, int pass_fd = -1);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `sig` to this child only. FAILED_PRECONDITION once it has been reaped.
  absl::Status Signal(int sig);
  // Waits up to `timeout` for the child to exit and reaps it; returns the raw wait status
  // (decode with WIFEXITED etc. or DescribeWaitStatus). DEADLINE_EXCEEDED if still running.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  // True until the child has exited (reaps it when it has).
  bool Running();
  // The wait status once reaped.
  bool reaped() const { return reaped_; }
  int wait_status() const { return wait_status_; }

  const std::string& stdout_path() const { return stdout_path_; }
  const std::string& stderr_path() const { return stderr_path_; }

 private:
  ChildProcess(pid_t pid, int pidfd, std::string out, std::string err, std::string sanitizer_log)
      : pid_(pid),
        pidfd_(pidfd),
        stdout_path_(std::move(out)),
        stderr_path_(std::move(err)),
        sanitizer_log_(std::move(sanitizer_log)) {}
  // Called once the child is reaped: ADD_FAILURE with every sanitizer report under
  // sanitizer_log_ (files "<sanitizer_log_>.<pid>").
  void FailOnSanitizerReports();
  pid_t pid_;
  int pidfd_;  // -1 when pidfd_open is unavailable
  bool reaped_ = false;
  int wait_status_ = 0;
  std::string stdout_path_;
  std::string stderr_path_;
  std::string sanitizer_log_;  // log_path prefix handed to the child's sanitizer runtime
};

// "exited 0", "exited 2", "killed by signal 11 (core dumped)".
std::string DescribeWaitStatus(int wait_status);

// Whole content of a (small) file; empty when it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// Outcome of a process run to completion.
struct ProcessResult {
  int wait_status = 0;
  int exit_code = -1;  // -1 when it did not exit normally
  std::string out;
  std::string err;
  std::string Describe() const;  // status plus stderr, for failure messages
};

// Runs argv to completion within `timeout` (then SIGKILLs it and returns DEADLINE_EXCEEDED).
// Output goes through files in `dir` named after `tag`.
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const std::string& dir, const std::string& tag,
                                         absl::Duration timeout);

// Polls `condition` until it holds or `timeout` passes; true when it held. The interval is the
// granularity of observation, not a synchronisation point.
bool PollUntil(const std::function<bool()>& condition, absl::Duration timeout,
               absl::Duration interval = absl::Milliseconds(20));

}  // namespace gdr::integ
