// The handoff suites' shared pieces: a server in a scratch directory and a raw peer that sends
// whatever bytes and descriptors a test chooses (hostile input included) and reads the replies.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/handoff/handoff_server.h"
#include "common/wire/handoff_message.h"
#include "tests/common/handoff/peer_bytes.h"
#include "tests/integration/child_process.h"

namespace gdr::handoff::test {

// A scratch directory (mode 0777, so another uid may connect) and a server listening in it.
struct TestServer {
  std::unique_ptr<integ::TempDir> dir;
  std::unique_ptr<HandoffServer> server;
  std::string path() const { return server->socket_path(); }
};
// Options' socket_path is set here; everything else is the caller's.
absl::StatusOr<TestServer> StartTestServer(HandoffServerOptions options);

// One connection that speaks the protocol by hand.
class RawPeer {
 public:
  static absl::StatusOr<RawPeer> Connect(const std::string& path);
  absl::Status Send(const std::string& packet, const std::vector<int>& fds = {});
  absl::Status Send(const Message& m, const std::vector<int>& fds = {});
  // The next reply (30 s at most); UNAVAILABLE "closed" when the server closed the connection.
  absl::StatusOr<Message> Read();
  // True when the server closed the connection (after any replies still queued are read).
  bool ClosedByServer();
  // HELLO, expecting HELLO_OK.
  absl::StatusOr<HelloOk> Hello(const std::string& name = "raw");
  int fd() const { return fd_.get(); }

 private:
  ScopedFd fd_;
};

// The error a reply carries as a status; INTERNAL when it is no ERROR.
absl::Status ErrorIn(const absl::StatusOr<Message>& reply);

}  // namespace gdr::handoff::test
