#include "tests/integration/child_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace gdr::integ {

// ---- TempDir ----

absl::StatusOr<std::unique_ptr<TempDir>> TempDir::Create(const std::string& prefix,
                                                         const std::string& base) {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string root = !base.empty() ? base : tmpdir && *tmpdir ? tmpdir : "/tmp";
  std::string templ = absl::StrCat(root, "/", prefix, "-XXXXXX");
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdtemp ", templ));
  }
  return std::unique_ptr<TempDir>(new TempDir(buf.data()));
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

// ---- ChildProcess ----

namespace {

// The sanitizer runtimes' option variables; each gets the child's log_path appended (a later
// flag overrides an earlier one), keeping whatever options the test run set.
constexpr const char* kSanitizerOptionVars[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "TSAN_OPTIONS"};

// A log_path prefix no other child of this test process shares (the runtime appends ".PID").
std::string NextSanitizerLogPrefix(const std::string& stderr_path) {
  static std::atomic<int> next{0};
  return absl::StrCat(stderr_path, ".sanitizer-", next.fetch_add(1));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::string& stdout_path,
    const std::string& stderr_path) {
  return SpawnWithEnv(argv, {}, stdout_path, stderr_path);
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::SpawnWithEnv(
    const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
    const std::string& stdout_path, const std::string& stderr_path, int pass_fd) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  absl::Cleanup free_actions = [&actions] { posix_spawn_file_actions_destroy(&actions); };
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  // The child must not hold the test's sockets: a killed client's links have to close for real.
  // Only a descriptor handed over on purpose survives, as fd 3.
  if (pass_fd >= 0) posix_spawn_file_actions_adddup2(&actions, pass_fd, 3);
  posix_spawn_file_actions_addclosefrom_np(&actions, pass_fd >= 0 ? 4 : 3);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  absl::Cleanup free_attr = [&attr] { posix_spawnattr_destroy(&attr); };
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const std::string& x : extra_env) replaced |= x.substr(0, x.find('=')) == name;
    if (!replaced) env_strings.push_back(kv);
  }
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  const std::string sanitizer_log = NextSanitizerLogPrefix(stderr_path);
  for (const char* var : kSanitizerOptionVars) {
    const std::string prefix = absl::StrCat(var, "=");
    auto it = std::find_if(env_strings.begin(), env_strings.end(),
                           [&](const std::string& kv) { return kv.rfind(prefix, 0) == 0; });
    if (it == env_strings.end()) it = env_strings.insert(env_strings.end(), prefix);
    absl::StrAppend(&*it, it->size() > prefix.size() ? ":" : "", "log_path=", sanitizer_log);
  }
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, &attr, args.data(), envp.data());
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("posix_spawn ", argv[0], ": ", std::strerror(rc)));
  }
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  return std::unique_ptr<ChildProcess>(
      new ChildProcess(pid, pidfd, stdout_path, stderr_path, sanitizer_log));
}

ChildProcess::~ChildProcess() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    // A report written before the kill (the runtime aborts the process after writing it).
    FailOnSanitizerReports();
  }
  if (pidfd_ >= 0) ::close(pidfd_);
}

void ChildProcess::FailOnSanitizerReports() {
  const std::filesystem::path prefix(sanitizer_log_);
  const std::string stem = prefix.filename().string() + ".";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(prefix.parent_path(), ec)) {
    if (e.path().filename().string().rfind(stem, 0) != 0) continue;
    ADD_FAILURE() << "sanitizer report from " << e.path().string() << " (child pid " << pid_
                  << ", " << DescribeWaitStatus(wait_status_) << "):\n"
                  << ReadFileOrEmpty(e.path().string());
  }
}

absl::Status ChildProcess::Signal(int sig) {
  if (reaped_) return absl::FailedPreconditionError(absl::StrCat("pid ", pid_, " already reaped"));
  if (::kill(pid_, sig) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("kill ", pid_));
  return absl::OkStatus();
}

bool ChildProcess::Running() {
  if (reaped_) return false;
  int st = 0;
  const pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    wait_status_ = st;
    FailOnSanitizerReports();
    return false;
  }
  return true;
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (Running()) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("pid ", pid_, " still running after ", absl::FormatDuration(timeout)));
    }
    if (pidfd_ >= 0) {
      // Readable once the child has exited: no polling interval involved.
      struct pollfd p = {pidfd_, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1);
    } else {
      PollUntil([this] { return !Running(); }, std::min(left, absl::Milliseconds(50)),
                absl::Milliseconds(5));
    }
  }
  return wait_status_;
}

std::string DescribeWaitStatus(int st) {
  if (WIFEXITED(st)) return absl::StrCat("exited ", WEXITSTATUS(st));
  if (WIFSIGNALED(st)) {
    return absl::StrCat("killed by signal ", WTERMSIG(st), " (", strsignal(WTERMSIG(st)), ")",
                        WCOREDUMP(st) ? " (core dumped)" : "");
  }
  return absl::StrCat("wait status 0x", absl::Hex(st));
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ProcessResult::Describe() const {
  return absl::StrCat(DescribeWaitStatus(wait_status), "; stdout: [", out, "]; stderr: [", err,
                      "]");
}

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const std::string& dir, const std::string& tag,
                                         absl::Duration timeout) {
  const std::string out = absl::StrCat(dir, "/", tag, ".out");
  const std::string err = absl::StrCat(dir, "/", tag, ".err");
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Spawn(argv, out, err);
  if (!child.ok()) return child.status();
  absl::StatusOr<int> st = (*child)->Wait(timeout);
  if (!st.ok()) {
    return absl::DeadlineExceededError(absl::StrCat(argv[0], " ", tag, ": ", st.status().message(),
                                                    "; stderr: ", ReadFileOrEmpty(err)));
  }
  ProcessResult r;
  r.wait_status = *st;
  r.exit_code = WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
  r.out = ReadFileOrEmpty(out);
  r.err = ReadFileOrEmpty(err);
  return r;
}

bool PollUntil(const std::function<bool()>& condition, absl::Duration timeout,
               absl::Duration interval) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(interval);
  }
}

}  // namespace gdr::integ
