#include "tests/integration/notify_listener.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace gdr::integ {

bool NotifyMessage::Has(const std::string& assignment) const {
  for (absl::string_view line : absl::StrSplit(text, '\n'))
    if (line == assignment) return true;
  return false;
}

std::string NotifyMessage::Get(const std::string& var) const {
  const std::string prefix = var + "=";
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, prefix)) return std::string(line.substr(prefix.size()));
  }
  return "";
}

absl::StatusOr<std::unique_ptr<NotifyListener>> NotifyListener::Bind(
    const std::string& path, std::function<void(const NotifyMessage&)> on_message) {
  std::unique_ptr<NotifyListener> l(new NotifyListener());
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  l->fd_ = ScopedFd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!l->fd_.valid()) return absl::ErrnoToStatus(errno, "socket(AF_UNIX, SOCK_DGRAM)");
  if (::bind(l->fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("bind ", path));
  }
  l->path_ = path;
  l->on_message_ = std::move(on_message);
  l->thread_ = std::thread([p = l.get()] { p->Loop(); });
  return l;
}

NotifyListener::~NotifyListener() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
  ::unlink(path_.c_str());
}

void NotifyListener::Loop() {
  char buf[4096];
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    struct pollfd p = {fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;  // 50 ms: how soon the destructor is noticed
    const ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), 0);
    if (n <= 0) continue;
    NotifyMessage m{absl::Now(), std::string(buf, static_cast<size_t>(n))};
    if (on_message_) on_message_(m);
    absl::MutexLock lock(&mu_);
    messages_.push_back(std::move(m));
  }
}

std::vector<NotifyMessage> NotifyListener::messages() const {
  absl::MutexLock lock(&mu_);
  return messages_;
}

size_t NotifyListener::size() const {
  absl::MutexLock lock(&mu_);
  return messages_.size();
}

int NotifyListener::WaitFor(const std::string& assignment, size_t from,
                            absl::Duration timeout) const {
  int found = -1;
  auto cond = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    for (size_t i = from; i < messages_.size(); ++i) {
      if (messages_[i].Has(assignment)) {
        found = static_cast<int>(i);
        return true;
      }
    }
    return false;
  };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
  return found;
}

}  // namespace gdr::integ
