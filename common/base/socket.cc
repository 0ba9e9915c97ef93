#include "common/base/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/host_port.h"

namespace gdr {

void ScopedFd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

absl::Status ReadFull(int fd, void* buf, size_t n, size_t* got) {
  auto* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::recv(fd, p + done, n - done, MSG_WAITALL);
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (got) *got = done;
    if (r == 0) return absl::UnavailableError("peer closed the connection");
    if (errno == EINTR) continue;
    return absl::ErrnoToStatus(errno, "recv");
  }
  if (got) *got = done;
  return absl::OkStatus();
}

absl::Status Discard(int fd, size_t n) {
  char scratch[64 * 1024];
  while (n > 0) {
    size_t step = n < sizeof(scratch) ? n : sizeof(scratch);
    absl::Status s = ReadFull(fd, scratch, step);
    if (!s.ok()) return s;
    n -= step;
  }
  return absl::OkStatus();
}

absl::Status WriteFullV(int fd, struct iovec* iov, int count) {
  while (count > 0) {
    struct msghdr msg {};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t w = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, "sendmsg");
    }
    const int done = AdvanceIovecs(iov, count, static_cast<size_t>(w));
    iov += done;
    count -= done;
  }
  return absl::OkStatus();
}

int AdvanceIovecs(struct iovec* iov, int count, size_t sent) {
  int done = 0;
  while (done < count && sent >= iov[done].iov_len) {
    sent -= iov[done].iov_len;
    ++done;
  }
  if (done < count) {
    iov[done].iov_base = static_cast<char*>(iov[done].iov_base) + sent;
    iov[done].iov_len -= sent;
  }
  return done;
}

absl::Status WriteFull(int fd, const void* buf, size_t n) {
  struct iovec iov {const_cast<void*>(buf), n};
  return WriteFullV(fd, &iov, 1);
}

absl::Status ReadFullBefore(int fd, void* buf, size_t n, absl::Time deadline) {
  auto* p = static_cast<char*>(buf);
  size_t done = 0;
  while (done < n) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms < 0) return absl::DeadlineExceededError("nothing in time");
    struct pollfd pfd {fd, POLLIN, 0};
    const int pr = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(ms + 1, 1 << 30)));
    if (pr < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, "poll");
    }
    if (pr == 0) continue;  // the deadline check above ends it
    const ssize_t r = ::recv(fd, p + done, n - done, MSG_DONTWAIT);
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return absl::UnavailableError("peer closed the connection");
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    return absl::ErrnoToStatus(errno, "recv");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SocketAddress>> ResolveTcp(const std::string& host, uint16_t port) {
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* res = nullptr;
  const std::string port_text = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve tcp target host '", host, "': ", gai_strerror(rc)));
  }
  absl::Cleanup free_res = [res] { ::freeaddrinfo(res); };
  std::vector<SocketAddress> out;
  for (auto* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    SocketAddress a;
    std::memcpy(&a.storage, ai->ai_addr, ai->ai_addrlen);
    a.length = ai->ai_addrlen;
    out.push_back(a);
  }
  if (out.empty()) return absl::UnavailableError(absl::StrCat("no address for ", host));
  return out;
}

absl::StatusOr<ScopedFd> ConnectTcp(const std::vector<SocketAddress>& addresses,
                                    const std::string& name, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", name));
  for (const SocketAddress& a : addresses) {
    const sockaddr* sa = a.get();
    ScopedFd fd(::socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      last = absl::ErrnoToStatus(errno, "socket");
      continue;
    }
    if (::connect(fd.get(), sa, a.length) != 0 && errno != EINPROGRESS) {
      last = absl::UnavailableError(
          absl::StrCat("connect to tcp target ", name, " failed: ", std::strerror(errno)));
      continue;
    }
    struct pollfd pfd {fd.get(), POLLOUT, 0};
    int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    int pr;
    do {
      pr = ::poll(&pfd, 1, ms < 0 ? 0 : static_cast<int>(ms));
    } while (pr < 0 && errno == EINTR);
    if (pr == 0) {
      return absl::UnavailableError(absl::StrCat("tcp target ", name,
                                                 " unreachable: connect timed out after ",
                                                 absl::FormatDuration(timeout)));
    }
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (pr < 0 || err != 0) {
      last = absl::UnavailableError(absl::StrCat("connect to tcp target ", name, " failed: ",
                                                 std::strerror(err ? err : errno)));
      continue;
    }
    int flags = ::fcntl(fd.get(), F_GETFL);
    ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  }
  return last;
}

absl::StatusOr<ScopedFd> ConnectTcp(const std::string& host, uint16_t port,
                                    absl::Duration timeout) {
  absl::StatusOr<std::vector<SocketAddress>> addresses = ResolveTcp(host, port);
  if (!addresses.ok()) return addresses.status();
  return ConnectTcp(*addresses, JoinHostPort(host, port), timeout);
}

absl::StatusOr<ScopedFd> ListenTcp(const std::string& host, uint16_t port, int backlog,
                                   uint16_t* bound_port) {
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  struct addrinfo* res = nullptr;
  const std::string port_text = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad listen address '", host, "': ", gai_strerror(rc)));
  }
  absl::Cleanup free_res = [res] { ::freeaddrinfo(res); };
  ScopedFd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, "socket");
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("bind ", host, ":", port));
  }
  if (::listen(fd.get(), backlog) != 0) return absl::ErrnoToStatus(errno, "listen");
  struct sockaddr_storage ss {};
  socklen_t len = sizeof(ss);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  if (bound_port) {
    *bound_port = ss.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  }
  return fd;
}

absl::StatusOr<std::string> LocalAddressToward(const std::string& host, uint16_t port) {
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  struct addrinfo* res = nullptr;
  const std::string port_text = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  absl::Cleanup free_res = [res] { ::freeaddrinfo(res); };
  ScopedFd fd(::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, "socket");
  // connect() on a UDP socket only picks a route and source address; no packet is sent.
  if (::connect(fd.get(), res->ai_addr, res->ai_addrlen) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("route to ", host));
  }
  struct sockaddr_storage ss {};
  socklen_t len = sizeof(ss);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  char text[INET6_ADDRSTRLEN] = {};
  const void* addr = ss.ss_family == AF_INET6
                         ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr)
                         : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr);
  ::inet_ntop(ss.ss_family, addr, text, sizeof(text));
  return std::string(text);
}

void SetSocketBuffers(int fd, int bytes) {
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
}

}  // namespace gdr

namespace gdr {

BufferedReader::BufferedReader(int fd, size_t capacity)
    : fd_(fd), buf_(new char[capacity]), cap_(capacity) {}

absl::Status BufferedReader::Fill() {
  for (;;) {
    ssize_t r = ::recv(fd_, buf_.get(), cap_, 0);
    if (r > 0) {
      begin_ = 0;
      end_ = static_cast<size_t>(r);
      return absl::OkStatus();
    }
    if (r == 0) return absl::UnavailableError("peer closed the connection");
    if (errno == EINTR) continue;
    return absl::ErrnoToStatus(errno, "recv");
  }
}

absl::Status BufferedReader::Read(void* dst, size_t n) {
  auto* out = static_cast<char*>(dst);
  while (n > 0) {
    if (begin_ == end_) {
      // Large remainder: bypass the buffer and land the bytes where they belong.
      if (n >= cap_ / 2) return ReadFull(fd_, out, n);
      absl::Status s = Fill();
      if (!s.ok()) return s;
    }
    const size_t take = std::min(n, end_ - begin_);
    std::memcpy(out, buf_.get() + begin_, take);
    begin_ += take;
    out += take;
    n -= take;
  }
  return absl::OkStatus();
}

absl::Status BufferedReader::Skip(size_t n) {
  while (n > 0) {
    if (begin_ == end_) {
      absl::Status s = Fill();
      if (!s.ok()) return s;
    }
    const size_t take = std::min(n, end_ - begin_);
    begin_ += take;
    n -= take;
  }
  return absl::OkStatus();
}

}  // namespace gdr
