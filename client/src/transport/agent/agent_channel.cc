#include "client/src/transport/agent/agent_channel.h"

#include <grpcpp/create_channel_posix.h>
#include <grpcpp/support/channel_arguments.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/socket.h"
#include "common/grpc/grpc_lifetime.h"

namespace gdr {

absl::StatusOr<AgentConnection> ConnectAgent(const std::string& socket_path,
                                             absl::Duration timeout) {
  KeepGrpcCallbackQueue();
  absl::StatusOr<std::unique_ptr<handoff::HandoffClient>> session = handoff::HandoffClient::Connect(
      socket_path, absl::StrCat("gdrstore client ", getpid()), timeout);
  if (!session.ok()) return session.status();
  // The agent makes the socket pair and keeps its end, an open file of its own.
  absl::StatusOr<ScopedFd> end = (*session)->OpenChannel();
  if (!end.ok()) {
    return absl::Status(end.status().code(),
                        absl::StrCat("agent ", socket_path, ": ", end.status().message()));
  }
  ScopedFd ours = *std::move(end);
  // gRPC's poller expects a non-blocking socket: a blocking read would stall it.
  if (const int flags = ::fcntl(ours.get(), F_GETFL); flags < 0 ||
      ::fcntl(ours.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("agent channel: O_NONBLOCK: ", strerror(errno)));
  }
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // gRPC owns the descriptor from here on.
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomInsecureChannelFromFd("gdragent", ours.Release(), args);
  return AgentConnection{std::shared_ptr<handoff::HandoffClient>(std::move(*session)),
                         std::move(channel)};
}

}  // namespace gdr
