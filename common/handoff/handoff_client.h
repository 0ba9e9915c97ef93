// The handing end of the handoff protocol (common/wire/handoff_message.h): a client process
// connects to a server's Unix socket (gdrstored's local transport, gdragent), opens a session
// and hands memory over. Requests are serialised on the one connection (registration is not on
// the op path); every wait has a deadline.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/socket.h"
#include "common/wire/handoff_message.h"

namespace gdr::handoff {

class HandoffClient {
 public:
  // Connects and says HELLO. UNAVAILABLE naming the path when nothing listens there (or it is
  // not a socket), the server's ERROR (e.g. PERMISSION_DENIED for a uid it does not admit),
  // DEADLINE_EXCEEDED when it does not answer within `timeout`.
  static absl::StatusOr<std::unique_ptr<HandoffClient>> Connect(const std::string& socket_path,
                                                                const std::string& name,
                                                                absl::Duration timeout);
  ~HandoffClient();

  uint64_t session() const { return hello_.session; }
  std::string key() const;  // the HelloOk key as 16 bytes
  const std::string& server() const { return hello_.server; }
  const std::string& socket_path() const { return path_; }

  // Hands a region over; `fd` is -1 for kinds that carry none (FdsFor). The rkey the server
  // assigned, or its ERROR as a status; UNAVAILABLE once the connection is gone.
  absl::StatusOr<uint32_t> Register(const Register& region, int fd);
  // A region mapped from several VMM allocations side by side (region.kind kGpuVmmChunks): each
  // allocation's descriptor (borrowed) and bytes, in address order, staged one REGISTER_CHUNK
  // each, then the REGISTER that maps them, with the connection held throughout so that no
  // other request of this client comes between. As Register otherwise; INVALID_ARGUMENT for no
  // chunks or more than kMaxChunks.
  struct Chunk {
    int fd = -1;
    uint64_t size = 0;
  };
  absl::StatusOr<uint32_t> RegisterChunks(const handoff::Register& region,
                                          const std::vector<Chunk>& chunks);
  absl::Status Deregister(uint32_t rkey);
  // Asks the server (the agent) for a channel: the client's end of a connected SOCK_STREAM
  // socket pair the server made and serves gRPC on. The server's refusal as a status.
  absl::StatusOr<ScopedFd> OpenChannel();

  // Closes the connection: the server ends the session (its regions go once their ops are
  // done); later requests are UNAVAILABLE. Idempotent.
  void Close();

  // OK while the connection is open; UNAVAILABLE once the server hung up or a request failed
  // on the socket.
  absl::Status status() const;

 private:
  HandoffClient(ScopedFd fd, std::string path, HelloOk hello, absl::Duration timeout);
  // `received`: where a descriptor the reply carries goes (null: none is expected).
  absl::StatusOr<Message> Call(Body body, int fd, ScopedFd* received = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<Message> CallLocked(Body body, int fd, ScopedFd* received)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const HelloOk hello_;
  const absl::Duration timeout_;
  mutable absl::Mutex mu_;
  ScopedFd fd_ ABSL_GUARDED_BY(mu_);
  uint32_t next_request_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gdr::handoff
