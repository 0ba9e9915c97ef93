#include "bench/daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/temp_path.h"
#include "common/base/status_macros.h"
#include "gdrstore/client.h"

extern char** environ;

namespace gdrbench {

using Clock = std::chrono::steady_clock;

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(const DaemonStart& how) {
  std::unique_ptr<DaemonProcess> d(new DaemonProcess());
  std::string dir_template = TempTemplate("gdr_bench");
  if (::mkdtemp(dir_template.data()) == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mkdtemp ", dir_template));
  }
  d->dir_ = dir_template;
  d->port_file_ = d->dir_ + "/port";
  d->log_file_ = d->dir_ + "/gdrstored.log";
  std::vector<std::string> args = {how.binary,
                                   "--listen=127.0.0.1:0",
                                   "--port-file=" + d->port_file_,
                                   absl::StrCat("--volume=vol0=", how.volume_bytes),
                                   absl::StrCat("--max-op-size=", how.max_op_bytes),
                                   "--log-level=warning"};
  for (const std::string& f : how.extra_flags) args.push_back(f);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, d->log_file_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, how.binary.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return absl::ErrnoToStatus(rc, absl::StrCat("cannot start daemon ", how.binary));
  d->pid_ = pid;
  d->command_ = absl::StrJoin(args, " ");
  GDR_RETURN_IF_ERROR(d->WaitReady(how.ready_timeout));
  return d;
}

DaemonProcess::~DaemonProcess() {
  Stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

// Polls for the port file, then for a Ping answer, until the deadline. Fails at once when the
// child exits.
absl::Status DaemonProcess::WaitReady(std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::unique_ptr<gdrstore::Client> probe;
  for (;;) {
    int wstatus = 0;
    if (::waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::UnavailableError(
          absl::StrCat("gdrstored exited during start-up (status ", wstatus, "):\n", LogTail()));
    }
    if (address_.empty()) {
      std::ifstream in(port_file_);
      int port = 0;
      if (in >> port && port > 0) address_ = absl::StrCat("127.0.0.1:", port);
    }
    if (!address_.empty()) {
      if (!probe) {
        gdrstore::ClientOptions o;
        o.daemon_address = address_;
        GDR_ASSIGN_OR_RETURN(probe, gdrstore::Client::Connect(o));
      }
      if (probe->Ping().ok()) return absl::OkStatus();
    }
    if (Clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "gdrstored did not answer Ping within ", timeout.count(), " ms:\n", LogTail()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // poll interval
  }
}

void DaemonProcess::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(15);
  for (;;) {
    int wstatus = 0;
    const pid_t r = ::waitpid(pid_, &wstatus, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "gdr_bench: gdrstored (pid %d) ignored SIGTERM; killing it\n", pid_);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &wstatus, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
}

std::string DaemonProcess::LogTail() const {
  std::ifstream in(log_file_);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() > 4000) text = text.substr(text.size() - 4000);
  return text;
}

}  // namespace gdrbench
