#include "common/handoff/handoff_client.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/base/fd_passing.h"

namespace gdr::handoff {
namespace {

absl::Status StatusOf(const Error& e) {
  const auto code = e.code >= 1 && e.code <= 16 ? static_cast<absl::StatusCode>(e.code)
                                                 : absl::StatusCode::kUnknown;
  return absl::Status(code, e.message);
}

// Sends one request and reads its reply, both within `timeout`. An ERROR with request id 0 is
// the server's word on the connection itself and is returned as the reply too.
absl::StatusOr<Message> Exchange(int fd, const Message& request, int pass_fd,
                                 absl::Duration timeout, ScopedFd* received = nullptr) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<int> fds;
  if (pass_fd >= 0) fds.push_back(pass_fd);
  absl::Status sent = SendWithFds(fd, Encode(request), fds);
  // A server that refused the connection may have answered and closed before the request
  // went: read what it said first (briefly), and report the send's error only without it.
  absl::StatusOr<ReceivedMessage> in = ReceiveWithFds(
      fd, kMaxMessageBytes, kMaxFds, sent.ok() ? deadline : absl::Now() + absl::Seconds(0.2));
  if (!in.ok()) {
    if (!sent.ok()) return sent;
    if (absl::IsDeadlineExceeded(in.status())) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no reply to ", MessageTypeName(TypeOf(request.body)), " within ",
          absl::FormatDuration(timeout)));
    }
    return absl::UnavailableError(absl::StrCat("handoff connection: ", in.status().message()));
  }
  if (in->eof) {
    if (!sent.ok()) return sent;
    return absl::UnavailableError("the server closed the handoff connection");
  }
  if (in->fds_lost) {
    // The reply stays in step (its bytes came); the server's channel end is lost with it.
    return absl::ResourceExhaustedError(absl::StrCat(
        "the descriptor the reply to ", MessageTypeName(TypeOf(request.body)),
        " carried could not be received: this process is out of descriptors (RLIMIT_NOFILE)"));
  }
  absl::StatusOr<Message> reply = Decode(in->bytes, in->fds.size());
  if (!reply.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the server's reply does not parse: ", reply.status().message()));
  }
  const auto* error = std::get_if<Error>(&reply->body);
  if (reply->request_id != request.request_id && !(error && reply->request_id == 0)) {
    return absl::UnavailableError(absl::StrFormat("reply to request %u came for request %u",
                                                  request.request_id, reply->request_id));
  }
  if (received != nullptr && !in->fds.empty()) *received = std::move(in->fds[0]);
  return reply;
}

absl::StatusOr<ScopedFd> ConnectUnix(const std::string& path, absl::Duration timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "socket path '%s' must be 1..%u bytes", path, sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  ScopedFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, "socket(AF_UNIX, SOCK_SEQPACKET)");
  // A Unix connect waits (for a full backlog) at most the send timeout; so do later sends.
  const timeval tv = absl::ToTimeval(timeout);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  while (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EINPROGRESS) {
      return absl::DeadlineExceededError(absl::StrCat(
          "connect to ", path, ": the server accepts no connection (backlog full)"));
    }
    return absl::UnavailableError(absl::StrCat("connect to ", path, ": ", strerror(errno)));
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HandoffClient>> HandoffClient::Connect(
    const std::string& socket_path, const std::string& name, absl::Duration timeout) {
  absl::StatusOr<ScopedFd> fd = ConnectUnix(socket_path, timeout);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<Message> reply = Exchange(fd->get(), Message{1, Hello{name}}, -1, timeout);
  if (!reply.ok()) {
    return absl::Status(reply.status().code(),
                        absl::StrCat(socket_path, ": ", reply.status().message()));
  }
  if (const auto* e = std::get_if<Error>(&reply->body)) return StatusOf(*e);
  const auto* ok = std::get_if<HelloOk>(&reply->body);
  if (ok == nullptr) {
    return absl::UnavailableError(absl::StrCat(socket_path, ": HELLO answered with ",
                                               MessageTypeName(TypeOf(reply->body))));
  }
  return std::unique_ptr<HandoffClient>(
      new HandoffClient(*std::move(fd), socket_path, *ok, timeout));
}

HandoffClient::HandoffClient(ScopedFd fd, std::string path, HelloOk hello,
                             absl::Duration timeout)
    : path_(std::move(path)), hello_(std::move(hello)), timeout_(timeout), fd_(std::move(fd)) {
  next_request_ = 2;  // 1 was HELLO
}

HandoffClient::~HandoffClient() = default;

std::string HandoffClient::key() const {
  return std::string(reinterpret_cast<const char*>(hello_.key.data()), hello_.key.size());
}

void HandoffClient::Close() {
  absl::MutexLock lock(&mu_);
  if (broken_.ok()) broken_ = absl::UnavailableError("the handoff session was closed");
  fd_.Reset();
}

absl::Status HandoffClient::status() const {
  absl::MutexLock lock(&mu_);
  return broken_;
}

absl::StatusOr<Message> HandoffClient::Call(Body body, int fd, ScopedFd* received) {
  absl::MutexLock lock(&mu_);
  return CallLocked(std::move(body), fd, received);
}

absl::StatusOr<Message> HandoffClient::CallLocked(Body body, int fd, ScopedFd* received) {
  if (!broken_.ok()) return broken_;
  Message request{next_request_++, std::move(body)};
  if (next_request_ == 0) next_request_ = 1;  // 0 is the server's "no request"
  absl::StatusOr<Message> reply = Exchange(fd_.get(), request, fd, timeout_, received);
  if (!reply.ok()) {
    // Out of step with the server now (a late reply would answer the next request).
    broken_ = absl::UnavailableError(
        absl::StrCat("handoff connection to ", path_, " is gone: ", reply.status().message()));
    fd_.Reset();
    return reply.status();
  }
  if (const auto* e = std::get_if<Error>(&reply->body)) {
    absl::Status s = StatusOf(*e);
    if (reply->request_id == 0) {
      broken_ = absl::UnavailableError(
          absl::StrCat("handoff server ", path_, " closed the connection: ", s.message()));
      fd_.Reset();
    }
    return s;
  }
  return reply;
}

absl::StatusOr<uint32_t> HandoffClient::Register(const handoff::Register& region, int fd) {
  const size_t want = FdsFor(region);
  if ((fd >= 0 ? 1u : 0u) != want) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a %s region takes %u descriptors; %s given", MemoryKindName(region.kind), want,
        fd >= 0 ? "one was" : "none was"));
  }
  absl::StatusOr<Message> reply = Call(region, fd);
  if (!reply.ok()) return reply.status();
  if (const auto* r = std::get_if<Registered>(&reply->body)) return r->rkey;
  return absl::UnavailableError(absl::StrCat("REGISTER answered with ",
                                             MessageTypeName(TypeOf(reply->body))));
}

absl::StatusOr<uint32_t> HandoffClient::RegisterChunks(const handoff::Register& region,
                                                       const std::vector<Chunk>& chunks) {
  if (region.kind != MemoryKind::kGpuVmmChunks) {
    return absl::InvalidArgumentError(absl::StrCat("chunks are staged for a gpu-vmm-chunks "
                                                   "region, not ",
                                                   MemoryKindName(region.kind)));
  }
  if (chunks.empty() || chunks.size() > kMaxChunks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a gpu-vmm-chunks region is handed over from 1..%u chunks; %u given", kMaxChunks,
        chunks.size()));
  }
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].fd < 0) {
      return absl::InvalidArgumentError(absl::StrCat("chunk ", i, " has no descriptor"));
    }
    absl::StatusOr<Message> staged = CallLocked(RegisterChunk{chunks[i].size}, chunks[i].fd,
                                                nullptr);
    if (!staged.ok()) return staged.status();
    const auto* ok = std::get_if<ChunkStaged>(&staged->body);
    if (ok == nullptr || ok->staged != i + 1) {
      // Out of step: the server's staging is not what this client sent.
      broken_ = absl::UnavailableError(absl::StrCat(
          "REGISTER_CHUNK ", i, " answered with ", MessageTypeName(TypeOf(staged->body)),
          ok ? absl::StrCat(" counting ", ok->staged) : ""));
      fd_.Reset();
      return broken_;
    }
  }
  absl::StatusOr<Message> reply = CallLocked(region, -1, nullptr);
  if (!reply.ok()) return reply.status();
  if (const auto* r = std::get_if<Registered>(&reply->body)) return r->rkey;
  return absl::UnavailableError(absl::StrCat("REGISTER answered with ",
                                             MessageTypeName(TypeOf(reply->body))));
}

absl::Status HandoffClient::Deregister(uint32_t rkey) {
  absl::StatusOr<Message> reply = Call(handoff::Deregister{rkey}, -1);
  if (!reply.ok()) return reply.status();
  if (std::holds_alternative<Deregistered>(reply->body)) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("DEREGISTER answered with ",
                                             MessageTypeName(TypeOf(reply->body))));
}

absl::StatusOr<ScopedFd> HandoffClient::OpenChannel() {
  ScopedFd end;
  absl::StatusOr<Message> reply = Call(handoff::OpenChannel{}, -1, &end);
  if (!reply.ok()) return reply.status();
  if (!std::holds_alternative<ChannelOpen>(reply->body)) {
    return absl::UnavailableError(absl::StrCat("OPEN_CHANNEL answered with ",
                                               MessageTypeName(TypeOf(reply->body))));
  }
  // Decode checked that CHANNEL_OPEN came with its one descriptor; it must be a stream socket.
  int type = 0;
  socklen_t len = sizeof(type);
  if (!end.valid() || ::getsockopt(end.get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
      type != SOCK_STREAM) {
    return absl::UnavailableError("CHANNEL_OPEN's descriptor is not a stream socket");
  }
  return end;
}

}  // namespace gdr::handoff
