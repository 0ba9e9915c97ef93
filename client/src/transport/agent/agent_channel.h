// The way into the node agent (gdragent): one Unix socket carries the handoff session (memory
// handed over without copies) and, through a socket pair passed over it, the gRPC channel the
// Client's calls go on. So a container needs nothing but that socket mounted: no RDMA device,
// no locked memory, no host network or IPC namespace.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/handoff/handoff_client.h"

namespace gdr {

struct AgentConnection {
  std::shared_ptr<handoff::HandoffClient> session;
  std::shared_ptr<grpc::Channel> channel;
};

// Connects to the agent's socket at `socket_path`, opens a session and a gRPC channel over a
// socket pair the agent serves. UNAVAILABLE naming the path when no agent listens there;
// the agent's refusal (PERMISSION_DENIED naming this process's uid); DEADLINE_EXCEEDED after
// `timeout`.
absl::StatusOr<AgentConnection> ConnectAgent(const std::string& socket_path,
                                             absl::Duration timeout);

}  // namespace gdr
