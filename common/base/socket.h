// Small POSIX socket helpers shared by the tcp initiator (daemon) and target (client):
// an owning fd, exact-length reads and vectored writes, a connect with a deadline, a listener.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gdr {

// Move-only owner of a file descriptor; closes it on destruction.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  ScopedFd& operator=(ScopedFd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset();
  // Gives the descriptor up to a new owner without closing it.
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
};

// Reads exactly `n` bytes. UNAVAILABLE "peer closed" on EOF (with `*got` = bytes read when
// non-null), UNAVAILABLE with errno text on error. Retries EINTR.
absl::Status ReadFull(int fd, void* buf, size_t n, size_t* got = nullptr);

// ReadFull that gives up at `deadline`: DEADLINE_EXCEEDED then. For the few frames of a link's
// opening exchange, where a peer that says nothing must not hold a thread for ever.
absl::Status ReadFullBefore(int fd, void* buf, size_t n, absl::Time deadline);

// Reads and drops `n` bytes (through a small stack buffer).
absl::Status Discard(int fd, size_t n);

// Writes all of `iov[0..count)`; modifies `iov` in place. Retries EINTR, uses MSG_NOSIGNAL.
absl::Status WriteFullV(int fd, struct iovec* iov, int count);

// After a (partial) sendmsg of `sent` bytes from `iov[0..count)`: returns how many leading
// iovecs went out whole (empty ones included) and trims the next one in place by the bytes of
// it that went. `sent` must not exceed the total length of the iovecs.
int AdvanceIovecs(struct iovec* iov, int count, size_t sent);
absl::Status WriteFull(int fd, const void* buf, size_t n);

// One resolved socket address (IPv4 or IPv6).
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// Every TCP address host:port (numeric or name) resolves to, in getaddrinfo's order.
// UNAVAILABLE naming the host when it does not resolve.
absl::StatusOr<std::vector<SocketAddress>> ResolveTcp(const std::string& host, uint16_t port);

// Connects to the first of `addresses` that accepts, all within `timeout`; TCP_NODELAY set.
// Resolves nothing, so the caller connects to exactly the addresses it checked. `name` is
// what the errors call the target. UNAVAILABLE on refusal, unreachable host or timeout.
absl::StatusOr<ScopedFd> ConnectTcp(const std::vector<SocketAddress>& addresses,
                                    const std::string& name, absl::Duration timeout);

// ResolveTcp then ConnectTcp.
absl::StatusOr<ScopedFd> ConnectTcp(const std::string& host, uint16_t port, absl::Duration timeout);

// Listening socket on host:port (port 0 = ephemeral). Returns the fd; *bound_port is the port.
absl::StatusOr<ScopedFd> ListenTcp(const std::string& host, uint16_t port, int backlog,
                                   uint16_t* bound_port);

// Local address (numeric) a UDP socket would use to reach host:port; sends nothing.
absl::StatusOr<std::string> LocalAddressToward(const std::string& host, uint16_t port);

// Sets socket buffer sizes (best effort) to `bytes`.
void SetSocketBuffers(int fd, int bytes);

}  // namespace gdr

namespace gdr {

// Buffered exact-length reader over a stream socket: small frames come out of one recv(2);
// large payloads are received straight into the destination. Not thread-safe.
class BufferedReader {
 public:
  explicit BufferedReader(int fd, size_t capacity = 64 * 1024);
  // Reads exactly n bytes into dst. Same errors as ReadFull.
  absl::Status Read(void* dst, size_t n);
  // Reads and drops n bytes.
  absl::Status Skip(size_t n);
  // True when bytes already received are waiting in the buffer.
  bool HasBuffered() const { return begin_ != end_; }

 private:
  absl::Status Fill();
  int fd_;
  std::unique_ptr<char[]> buf_;
  size_t cap_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace gdr
