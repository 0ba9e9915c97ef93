#include "common/base/fd_passing.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace gdr {
namespace {

// The kernel passes at most this many descriptors in one message (SCM_MAX_FD).
constexpr size_t kScmMaxFd = 253;

// Waits for `sock` to be readable until `deadline`: OK, DEADLINE_EXCEEDED or the poll error.
absl::Status WaitReadable(int sock, absl::Time deadline) {
  for (;;) {
    int timeout_ms = -1;
    if (deadline != absl::InfiniteFuture()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("no message in time");
      // Round up so a wait never ends just before its deadline and spins.
      timeout_ms = static_cast<int>(
          std::min<int64_t>(absl::ToInt64Milliseconds(left + absl::Microseconds(999)), 1 << 30));
    }
    pollfd p{sock, POLLIN, 0};
    const int r = ::poll(&p, 1, timeout_ms);
    if (r > 0) return absl::OkStatus();  // readable, hung up or in error: recvmsg says which
    if (r < 0 && errno != EINTR) return absl::ErrnoToStatus(errno, "poll");
  }
}

}  // namespace

absl::StatusOr<PeerCredentials> PeerCredentialsOf(int sock) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return absl::ErrnoToStatus(errno, "getsockopt(SO_PEERCRED)");
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

absl::Status SendWithFds(int sock, absl::string_view bytes, absl::Span<const int> fds) {
  if (fds.size() > kScmMaxFd) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%u descriptors in one message, more than the kernel's %u", fds.size(),
                        kScmMaxFd));
  }
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control;
  if (!fds.empty()) {
    control.assign(CMSG_SPACE(fds.size() * sizeof(int)), 0);
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  }
  for (;;) {
    const ssize_t w = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (w >= 0) {
      // SOCK_SEQPACKET and SOCK_DGRAM send all or nothing; a stream socket may not.
      if (static_cast<size_t>(w) != bytes.size()) {
        return absl::UnavailableError(
            absl::StrFormat("sendmsg sent %d of %u bytes", w, bytes.size()));
      }
      return absl::OkStatus();
    }
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN || errno == ECONNREFUSED) {
      return absl::UnavailableError(absl::StrCat("the peer is gone (sendmsg: ", strerror(errno),
                                                 ")"));
    }
    if (errno == EAGAIN) {
      return absl::DeadlineExceededError("sendmsg: the peer does not read (send timed out)");
    }
    return absl::ErrnoToStatus(errno, "sendmsg");
  }
}

absl::StatusOr<ReceivedMessage> ReceiveWithFds(int sock, size_t max_bytes, size_t max_fds,
                                               absl::Time deadline) {
  if (max_fds > kScmMaxFd) max_fds = kScmMaxFd;
  ReceivedMessage out;
  out.bytes.resize(max_bytes);
  // Room for one more descriptor than allowed, so "too many" is told apart from a truncation
  // and every descriptor that came is owned (and closed) here.
  std::vector<char> control(CMSG_SPACE((max_fds + 1) * sizeof(int)), 0);
  bool reset = false;
  for (;;) {
    if (!reset) {
      if (absl::Status s = WaitReadable(sock, deadline); !s.ok()) return s;
    }
    iovec iov{out.bytes.data(), out.bytes.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    const ssize_t r = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (r < 0) {
      if (errno == EINTR) continue;
      // A peer that closed with our message unread leaves ECONNRESET pending, and Linux
      // reports it before what the peer sent first (a refusal, say): read once more.
      if (errno == ECONNRESET && !reset) {
        reset = true;
        continue;
      }
      if (errno == ECONNRESET || (errno == EAGAIN && reset)) {
        out.bytes.clear();
        out.eof = true;
        return out;
      }
      if (errno == EAGAIN) continue;
      return absl::UnavailableError(absl::StrCat("recvmsg: ", strerror(errno)));
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < n; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        out.fds.emplace_back(fd);
      }
    }
    const size_t got = static_cast<size_t>(r);
    if ((msg.msg_flags & MSG_TRUNC) != 0) {
      out.fds.clear();
      return absl::InvalidArgumentError(absl::StrFormat(
          "a message longer than the %u bytes this receiver takes", max_bytes));
    }
    // Truncated with room left: the kernel stopped installing descriptors (EMFILE), not the
    // sender sending too many (those fill the spare slot).
    if ((msg.msg_flags & MSG_CTRUNC) != 0 && out.fds.size() <= max_fds) {
      out.fds.clear();
      out.bytes.resize(got);
      out.fds_lost = true;
      return out;
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0 || out.fds.size() > max_fds) {
      out.fds.clear();
      return absl::InvalidArgumentError(absl::StrFormat(
          "a message with more descriptors than the %u this receiver takes", max_fds));
    }
    out.bytes.resize(got);
    // A zero-length read without descriptors is the peer's close (an empty SOCK_SEQPACKET
    // message reads the same: no protocol here sends one, so both end the conversation).
    out.eof = got == 0 && out.fds.empty();
    return out;
  }
}

}  // namespace gdr
