#include "bench/client_fleet.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

extern char** environ;

namespace gdrbench {
namespace {

// A pipe end moved to fd 10 or above, so that a dup2 onto kStartFd/kReportFd in the child
// never finds the source already sitting there (and keeping its close-on-exec flag).
absl::StatusOr<int> HighFd(int fd) {
  const int high = ::fcntl(fd, F_DUPFD_CLOEXEC, 10);
  const int err = errno;
  ::close(fd);
  if (high < 0) return absl::ErrnoToStatus(err, "fcntl(F_DUPFD_CLOEXEC)");
  return high;
}

std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exit status ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return absl::StrCat("killed by signal ", WTERMSIG(wait_status));
  return absl::StrCat("wait status ", wait_status);
}

}  // namespace

absl::StatusOr<std::vector<ClientReport>> ClientFleet::Run(
    const std::string& self, const std::vector<ScaleClientArgs>& clients,
    const std::string& log_path, const FleetLimits& limits) {
  ClientFleet f;
  GDR_RETURN_IF_ERROR(f.Spawn(self, clients, log_path));

  GDR_RETURN_IF_ERROR(f.Pump(
      absl::Now() + limits.ready, [](const Child& c) { return c.has_report || c.reaped; },
      "get ready"));
  size_t ready = 0;
  for (const Child& c : f.children_) {
    ready += c.has_report && c.report.kind == ClientReport::Kind::kReady && !c.reaped;
  }
  // One byte per ready client; closing the write end then tells any other reader to give up.
  const std::string go(ready, 'g');
  absl::Status started = WriteToPipe(f.start_w_, go);
  ::close(f.start_w_);
  f.start_w_ = -1;
  if (!started.ok()) return started;

  GDR_RETURN_IF_ERROR(f.Pump(
      absl::Now() + limits.run,
      [](const Child& c) {
        return c.reaped || (c.has_report && c.report.kind != ClientReport::Kind::kReady);
      },
      "finish"));
  GDR_RETURN_IF_ERROR(
      f.Pump(absl::Now() + limits.exit, [](const Child& c) { return c.reaped; }, "exit"));

  std::vector<ClientReport> out;
  for (size_t i = 0; i < f.children_.size(); ++i) {
    const Child& c = f.children_[i];
    ClientReport r = c.report;
    r.index = static_cast<uint32_t>(i);
    r.pid = c.pid;
    const bool clean = WIFEXITED(c.wait_status) && WEXITSTATUS(c.wait_status) == 0;
    if (!c.has_report || r.kind == ClientReport::Kind::kReady) {
      r.kind = ClientReport::Kind::kFailed;
      r.code = "UNAVAILABLE";
      r.message = absl::StrCat("client process ", c.pid, " ended (", DescribeExit(c.wait_status),
                               ") without reporting a result; see ", log_path);
    } else if (r.kind == ClientReport::Kind::kDone && !clean) {
      r.kind = ClientReport::Kind::kFailed;
      r.code = "INTERNAL";
      r.message = absl::StrCat("client process ", c.pid, " reported its result, then ended with ",
                               DescribeExit(c.wait_status), "; see ", log_path);
    }
    out.push_back(std::move(r));
  }
  return out;
}

ClientFleet::~ClientFleet() {
  KillAll();
  if (start_w_ >= 0) ::close(start_w_);
  if (report_r_ >= 0) ::close(report_r_);
}

absl::Status ClientFleet::Spawn(const std::string& self,
                                const std::vector<ScaleClientArgs>& clients,
                                const std::string& log_path) {
  int sp[2], rp[2];
  if (::pipe2(sp, O_CLOEXEC) != 0) return absl::ErrnoToStatus(errno, "pipe2 (start)");
  if (::pipe2(rp, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(sp[0]);
    ::close(sp[1]);
    return absl::ErrnoToStatus(err, "pipe2 (report)");
  }
  absl::StatusOr<int> start_r = HighFd(sp[0]), start_w = HighFd(sp[1]);
  absl::StatusOr<int> report_r = HighFd(rp[0]), report_w = HighFd(rp[1]);
  if (start_w.ok()) start_w_ = *start_w;
  if (report_r.ok()) report_r_ = *report_r;
  auto close_child_ends = [&] {
    if (start_r.ok()) ::close(*start_r);
    if (report_w.ok()) ::close(*report_w);
  };
  for (const absl::StatusOr<int>* fd : {&start_r, &start_w, &report_r, &report_w}) {
    if (!fd->ok()) {
      close_child_ends();
      return fd->status();
    }
  }
  ::fcntl(report_r_, F_SETFL, O_NONBLOCK);

  absl::Status status;
  for (size_t i = 0; i < clients.size() && status.ok(); ++i) {
    ScaleClientArgs a = clients[i];
    a.index = static_cast<uint32_t>(i);
    a.parent = ::getpid();
    std::vector<std::string> args = {self, kScaleClientFlag};
    for (std::string& f : a.ToFlags()) args.push_back(std::move(f));
    std::vector<char*> argv;
    for (std::string& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, *start_r, kStartFd);
    posix_spawn_file_actions_adddup2(&fa, *report_w, kReportFd);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, self.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      status = absl::ErrnoToStatus(rc, absl::StrCat("cannot start client process ", i, " (",
                                                    self, ") after ", i, " others"));
      break;
    }
    Child c;
    c.pid = pid;
    children_.push_back(c);
  }
  // Only the children hold these ends now: EOF on the report pipe means all of them are gone.
  close_child_ends();
  return status;
}

template <typename Pred>
absl::Status ClientFleet::Pump(absl::Time deadline, Pred settled, const char* phase) {
  for (;;) {
    Drain();
    ReapExited();
    Drain();  // lines a child wrote just before it exited
    const size_t open = std::count_if(children_.begin(), children_.end(),
                                      [&](const Child& c) { return !settled(c); });
    if (open == 0) return absl::OkStatus();
    if (absl::Now() > deadline) {
      KillAll();
      return absl::DeadlineExceededError(absl::StrCat(
          open, " of ", children_.size(), " client processes did not ", phase,
          " in time; all were killed"));
    }
    pollfd p{report_r_, POLLIN, 0};
    const int n = ::poll(&p, 1, 50);
    // After every writer is gone the pipe reports hang-up at once; pace the reaping loop.
    if (n > 0 && (p.revents & POLLHUP) && !(p.revents & POLLIN)) ::usleep(5000);
  }
}

void ClientFleet::Drain() {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(report_r_, buf, sizeof(buf));
    if (n <= 0) break;  // EAGAIN (nothing more now), EOF, or an error the next poll shows
    pending_.append(buf, static_cast<size_t>(n));
  }
  size_t nl;
  while ((nl = pending_.find('\n')) != std::string::npos) {
    const std::string line = pending_.substr(0, nl);
    pending_.erase(0, nl + 1);
    absl::StatusOr<ClientReport> r = ParseReport(line);
    if (!r.ok() || r->index >= children_.size() || children_[r->index].pid != r->pid) {
      std::fprintf(stderr, "gdr_bench: ignoring a stray client report line: %s\n", line.c_str());
      continue;
    }
    children_[r->index].report = *std::move(r);
    children_[r->index].has_report = true;
  }
}

void ClientFleet::ReapExited() {
  for (Child& c : children_) {
    if (c.reaped) continue;
    int ws = 0;
    const pid_t r = ::waitpid(c.pid, &ws, WNOHANG);
    if (r == c.pid || (r < 0 && errno == ECHILD)) {
      c.reaped = true;
      c.wait_status = ws;
    }
  }
}

void ClientFleet::KillAll() {
  for (Child& c : children_) {
    if (c.reaped) continue;
    ::kill(c.pid, SIGKILL);
    int ws = 0;
    while (::waitpid(c.pid, &ws, 0) < 0 && errno == EINTR) {
    }
    c.reaped = true;
    c.wait_status = ws;
  }
}

}  // namespace gdrbench
