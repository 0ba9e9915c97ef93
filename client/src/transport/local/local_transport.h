// The client side of the local transport: memory is handed, without a copy, to a server on this
// host through its Unix socket (common/handoff): to gdrstored, which then copies between its
// store and that memory itself, or to the node agent (client/src/transport/agent/), which moves
// it on to the daemons. Descriptors name the handoff session, its key and the region's rkey.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/src/transport/client_transport.h"
#include "common/handoff/handoff_client.h"
#include "gdrstore/types.h"

namespace gdr {

class LocalTransport final : public ClientTransport {
 public:
  // Connects to the handoff socket at `socket_path` and opens a session. UNAVAILABLE naming the
  // path when nothing listens there; the server's refusal (PERMISSION_DENIED naming the uid).
  static absl::StatusOr<std::shared_ptr<LocalTransport>> Open(const std::string& socket_path,
                                                              absl::Duration timeout);
  // Over a session already open (the agent's, whose socket also carries its gRPC channel).
  static std::shared_ptr<LocalTransport> Over(std::shared_ptr<handoff::HandoffClient> session,
                                              bool agent);
  ~LocalTransport() override;  // Close()

  // Hands the region over: host memory the library allocated as its memfd, GPU memory as a
  // CUDA IPC handle or (VMM allocations) a POSIX fd, with the allocation's base and offset.
  // FAILED_PRECONDITION for host memory the caller owns (not shareable: it names
  // AllocateBuffer); the server's refusal (limits, a GPU it cannot import) otherwise.
  absl::StatusOr<std::function<void()>> Register(const std::shared_ptr<Region>& region) override;
  void DescribeEndpoint(gdrstore::v1::RemoteBuffer* buffer) const override;
  // Ends the session: the server drops every region once the ops on them are done.
  void Close() override;
  absl::Status session_status() const override;
  std::string HopTo(const Region& region, int rail) const override;
  void FillInfo(gdrstore::TransportInfo* info) const override;
  // A session serves the one server it was opened with: another daemon is reached its own way.
  absl::StatusOr<std::shared_ptr<ClientTransport>> Attach(
      gdrstore::v1::GdrStore::Stub* stub) override;

 private:
  LocalTransport(std::shared_ptr<handoff::HandoffClient> session, bool agent)
      : session_(std::move(session)), agent_(agent) {}

  std::shared_ptr<handoff::HandoffClient> session_;
  const bool agent_;
};

}  // namespace gdr
