#include "tests/common/handoff/handoff_test_util.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/fd_passing.h"

namespace gdr::handoff::test {

absl::StatusOr<TestServer> StartTestServer(HandoffServerOptions options) {
  TestServer t;
  absl::StatusOr<std::unique_ptr<integ::TempDir>> dir = integ::TempDir::Create("handoff");
  if (!dir.ok()) return dir.status();
  t.dir = *std::move(dir);
  if (::chmod(t.dir->path().c_str(), 0777) != 0) return absl::ErrnoToStatus(errno, "chmod");
  options.socket_path = t.dir->File("handoff.sock");
  absl::StatusOr<std::unique_ptr<HandoffServer>> server = HandoffServer::Start(std::move(options));
  if (!server.ok()) return server.status();
  t.server = *std::move(server);
  return t;
}

absl::StatusOr<RawPeer> RawPeer::Connect(const std::string& path) {
  RawPeer p;
  p.fd_ = ScopedFd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(p.fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::ErrnoToStatus(errno, "connect");
  }
  return p;
}

absl::Status RawPeer::Send(const std::string& packet, const std::vector<int>& fds) {
  return SendWithFds(fd_.get(), packet, fds);
}

absl::Status RawPeer::Send(const Message& m, const std::vector<int>& fds) {
  return Send(Encode(m), fds);
}

absl::StatusOr<Message> RawPeer::Read() {
  absl::StatusOr<ReceivedMessage> in =
      ReceiveWithFds(fd_.get(), kMaxMessageBytes, kMaxFds, absl::Now() + absl::Seconds(30));
  if (!in.ok()) return in.status();
  if (in->eof) return absl::UnavailableError("closed");
  return Decode(in->bytes, in->fds.size());
}

bool RawPeer::ClosedByServer() {
  for (;;) {
    absl::StatusOr<ReceivedMessage> in =
        ReceiveWithFds(fd_.get(), kMaxMessageBytes, kMaxFds, absl::Now() + absl::Seconds(30));
    if (!in.ok()) return false;
    if (in->eof) return true;
  }
}

absl::StatusOr<HelloOk> RawPeer::Hello(const std::string& name) {
  if (absl::Status s = Send(Message{1, handoff::Hello{name}}); !s.ok()) return s;
  absl::StatusOr<Message> m = Read();
  if (!m.ok()) return m.status();
  if (const auto* ok = std::get_if<HelloOk>(&m->body)) return *ok;
  return absl::InternalError(absl::StrCat("HELLO answered with ", MessageTypeName(TypeOf(m->body)),
                                          ": ", ErrorIn(m).ToString()));
}

absl::Status ErrorIn(const absl::StatusOr<Message>& reply) {
  if (!reply.ok()) {
    return absl::InternalError(absl::StrCat("no reply: ", reply.status().ToString()));
  }
  if (const auto* e = std::get_if<Error>(&reply->body)) {
    return absl::Status(static_cast<absl::StatusCode>(e->code), e->message);
  }
  return absl::InternalError(
      absl::StrCat("the reply is ", MessageTypeName(TypeOf(reply->body)), ", not ERROR"));
}

}  // namespace gdr::handoff::test
