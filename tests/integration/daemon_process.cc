#include "tests/integration/daemon_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
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
#include <future>
#include <sstream>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

extern char** environ;

namespace gdr::integ {

// ---- TempDir ----

absl::StatusOr<std::unique_ptr<TempDir>> TempDir::Create(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = absl::StrCat(base && *base ? base : "/tmp", "/", prefix, "-XXXXXX");
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
    const std::string& stdout_path, const std::string& stderr_path) {
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
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);

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

// ---- health check ----

absl::StatusOr<bool> HealthCheck(const std::string& address, absl::Duration timeout,
                                 std::shared_ptr<grpc::ChannelCredentials> credentials) {
  auto channel = grpc::CreateChannel(
      address, credentials != nullptr ? credentials : grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  // HealthCheckRequest{service: ""}: field 1, wire type 2, length 0.
  const char request_bytes[] = {0x0a, 0x00};
  grpc::Slice slice(request_bytes, sizeof(request_bytes));
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ctx.set_wait_for_ready(true);  // a daemon still binding is "not yet", not "refused"
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  grpc::Status s = done.get_future().get();
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("Health/Check: ", s.error_message()));
  }
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("Health/Check: bad response buffer");
  std::string bytes;
  for (const grpc::Slice& sl : slices)
    bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
  // HealthCheckResponse{status: enum field 1}. Absent field = UNKNOWN (0).
  uint64_t status = 0;
  size_t i = 0;
  while (i < bytes.size()) {
    const uint8_t key = static_cast<uint8_t>(bytes[i++]);
    if (key != 0x08) return absl::InternalError("Health/Check: unexpected response field");
    uint64_t v = 0;
    int shift = 0;
    while (i < bytes.size()) {
      const uint8_t b = static_cast<uint8_t>(bytes[i++]);
      v |= uint64_t{b & 0x7fu} << shift;
      shift += 7;
      if ((b & 0x80) == 0) break;
    }
    status = v;
  }
  return status == 1;  // SERVING
}

// ---- /proc ----

absl::StatusOr<int> CountOpenFds(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/fd");
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("opendir ", path));
  int n = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

std::string DescribeOpenFds(pid_t pid) {
  std::string out;
  const std::string path = absl::StrCat("/proc/", pid, "/fd");
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
    std::error_code ec2;
    auto target = std::filesystem::read_symlink(e.path(), ec2);
    absl::StrAppend(&out, e.path().filename().string(), "->", ec2 ? "?" : target.string(), " ");
  }
  return out;
}

absl::StatusOr<uint64_t> ResidentBytes(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/status");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view v(line);
    if (!absl::ConsumePrefix(&v, "VmRSS:")) continue;
    v = absl::StripAsciiWhitespace(v);
    absl::ConsumeSuffix(&v, "kB");
    v = absl::StripAsciiWhitespace(v);
    uint64_t kb = 0;
    if (!absl::SimpleAtoi(v, &kb)) return absl::InternalError(absl::StrCat("bad VmRSS: ", line));
    return kb * 1024;
  }
  return absl::NotFoundError(absl::StrCat("no VmRSS in ", path));
}

// ---- DaemonProcess ----

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(
    const std::vector<std::string>& args, absl::Duration ready_timeout) {
  DaemonStart how;
  how.ready_timeout = ready_timeout;
  return Start(args, how);
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(
    const std::vector<std::string>& args, const DaemonStart& how) {
  const absl::Duration ready_timeout = how.ready_timeout;
  std::unique_ptr<DaemonProcess> d(new DaemonProcess());
  absl::StatusOr<std::unique_ptr<TempDir>> dir = TempDir::Create("gdrstored-integ");
  if (!dir.ok()) return dir.status();
  d->dir_ = std::move(*dir);
  const std::string port_file = d->dir_->File("port");
  // $GDR_GDRSTORED_BIN overrides the built path (test binaries carried to another machine).
  const char* bin_env = std::getenv("GDR_GDRSTORED_BIN");
  const std::string bin = bin_env != nullptr && *bin_env != '\0' ? bin_env : GDR_GDRSTORED_BIN;
  std::vector<std::string> argv = {bin, "--listen", how.listen, "--port-file", port_file};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> child =
      ChildProcess::Spawn(argv, d->dir_->File("stdout"), d->dir_->File("stderr"));
  if (!child.ok()) return child.status();
  d->child_ = std::move(*child);

  const absl::Time deadline = absl::Now() + ready_timeout;
  // The port file appears (renamed into place) once the server is bound and serving.
  bool died = false;
  const bool have_port = PollUntil(
      [&] {
        if (!d->child_->Running()) {
          died = true;
          return true;
        }
        std::string text = ReadFileOrEmpty(port_file);
        uint32_t port = 0;
        if (absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port) && port > 0 && port < 65536) {
          d->port_ = static_cast<uint16_t>(port);
          return true;
        }
        return false;
      },
      ready_timeout, absl::Milliseconds(10));
  if (died) {
    return absl::InternalError(absl::StrCat("gdrstored ",
                                            DescribeWaitStatus(d->child_->wait_status()),
                                            " before serving; stderr: ", d->Stderr()));
  }
  if (!have_port) {
    return absl::DeadlineExceededError(absl::StrCat("gdrstored wrote no port file within ",
                                                    absl::FormatDuration(ready_timeout),
                                                    "; stderr: ", d->Stderr()));
  }
  if (!how.health_check) return d;
  // Readiness is what the health service says, not the file.
  absl::Status last;
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    absl::StatusOr<bool> serving = HealthCheck(d->address(), left, how.credentials);
    if (serving.ok() && *serving) return d;
    last = serving.ok() ? absl::UnavailableError("health: NOT_SERVING") : serving.status();
    if (!d->child_->Running()) break;
    if (serving.ok()) absl::SleepFor(absl::Milliseconds(10));  // NOT_SERVING: ask again
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "gdrstored on ", d->address(), " not healthy: ", last.ToString(), "; stderr: ", d->Stderr()));
}

DaemonProcess::~DaemonProcess() {
  // The default drain timeout is 10 s; a daemon that takes longer is SIGKILLed by ~ChildProcess.
  if (child_ != nullptr && child_->Running()) (void)Terminate(absl::Seconds(20));
}

std::string DaemonProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

absl::StatusOr<int> DaemonProcess::Terminate(absl::Duration timeout) {
  if (absl::Status s = child_->Signal(SIGTERM); !s.ok()) return s;
  return child_->Wait(timeout);
}

std::string DaemonProcess::Stderr() const { return ReadFileOrEmpty(child_->stderr_path()); }

}  // namespace gdr::integ
