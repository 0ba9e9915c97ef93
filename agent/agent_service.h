// The gdrstore.v1.GdrStore service as gdragent serves it on each client's channel: a daemon
// that offers only the local transport. An op names memory the client handed over (its
// LocalEndpoint carries the session and key the agent's socket gave it); the agent resolves it
// to the region and its upstream registration and forwards the op to the storage daemon, then
// answers with the daemon's result, its code kept and its message prefixed. No handler blocks.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/client_table.h"
#include "agent/upstreams.h"
#include "common/grpc/gdrstore_server.h"
#include "common/handoff/handoff_server.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr::agent {

struct AgentServiceOptions {
  std::string socket_path;  // GetInfo.local.socket_path
  std::string host_id;      // GetInfo.local.host_id (this host's boot id)
  uid_t agent_uid = 0;      // sees every client in GetStats, as root does
  // Stream calls one client session may have open at once, over all its channels.
  uint32_t max_streams_per_client = 256;
};

// Write, Read and Stream calls come in through GdrStoreServer as UnaryOp and OpenStream.
class AgentService final : public GdrStoreServer {
 public:
  // `upstream` and `sessions` must outlive the service and every call it started.
  AgentService(Upstreams* upstream, ClientTable* sessions, AgentServiceOptions options);

  // The handoff server that issued the sessions ops name; until set, ops are UNAVAILABLE.
  // Must outlive the service's calls.
  void set_handoff(const handoff::HandoffServer* handoff) { handoff_.store(handoff); }
  // A channel the agent serves on: the socket `fd` that `session` handed over. Calls arriving
  // on it are known by it (GetStats shows its uid's sessions; Streams count against the
  // session's --max-streams-per-client).
  void AddChannel(int fd, const handoff::SessionInfo& session);

  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* ctx,
                                    const gdrstore::v1::GetInfoRequest* request,
                                    gdrstore::v1::GetInfoResponse* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* ctx,
                                     const gdrstore::v1::GetStatsRequest* request,
                                     gdrstore::v1::GetStatsResponse* response) override;
  grpc::ServerBidiReactor<gdrstore::v1::ConnectRequest, gdrstore::v1::ConnectResponse>* Connect(
      grpc::CallbackServerContext* ctx) override;

  // Validates one op, resolves its memory, admits it for its session and forwards it on
  // upstream lane `lane`. `done` runs exactly once, possibly inline, with the result (or the
  // refusal: a not-admitted one keeps its mark). `deadline` max: the upstream default.
  using OpDone = std::function<void(absl::StatusOr<gdrstore::OpResult>)>;
  void StartOp(bool write, const gdrstore::v1::Extent* extent,
               const gdrstore::v1::RemoteBuffer* buffer, bool sync, bool crc,
               std::chrono::system_clock::time_point deadline, uint32_t lane, OpDone done);

  // From now on new ops are refused UNAVAILABLE; those in flight run on.
  void StartDrain() { draining_.store(true); }
  int64_t inflight_ops() const { return sessions_->inflight(); }
  uint32_t open_streams() const { return streams_.load(); }

 private:
  class StreamCall;  // agent_stream.cc
  struct ChannelOwner {
    uid_t uid = 0;
    uint64_t session = 0;
  };
  // The client whose channel carries `ctx`, when known.
  std::optional<ChannelOwner> Caller(const grpc::CallbackServerContext& ctx) const;
  std::optional<uid_t> CallerUid(const grpc::CallbackServerContext& ctx) const;
  // Counts a Stream call against its session's limit; the refusal past it. EndStream gives the
  // place back (a call whose session is unknown, 0, is not counted).
  absl::Status BeginStream(uint64_t session);
  void EndStream(uint64_t session);
  grpc::ServerUnaryReactor* UnaryOp(grpc::CallbackServerContext* ctx, const StreamOpRequest& op,
                                    gdrstore::v1::OpResponse* response) override;
  // The call's handler (agent_stream.cc); past --max-streams-per-client the call is refused.
  absl::StatusOr<std::unique_ptr<StreamHandler>> OpenStream(
      grpc::CallbackServerContext* ctx) override;

  Upstreams* const upstream_;
  ClientTable* const sessions_;
  const AgentServiceOptions options_;
  const absl::Time started_;
  std::atomic<const handoff::HandoffServer*> handoff_{nullptr};
  std::atomic<bool> draining_{false};
  std::atomic<uint32_t> streams_{0};
  mutable absl::Mutex channels_mu_;
  // Channel socket fd -> the session that handed it over. gRPC names a channel's calls
  // "fd:N"; a number reused by a later channel is overwritten by it.
  std::map<int, ChannelOwner> channels_ ABSL_GUARDED_BY(channels_mu_);
  // Stream calls open per session (absent: none).
  std::map<uint64_t, uint32_t> session_streams_ ABSL_GUARDED_BY(channels_mu_);
};

// How the agent words an error it answers: "gdragent: <why>" (for a daemon's own answer
// "gdragent: daemon HOST:PORT: <why>"); the code and the not-admitted mark are kept.
absl::Status AgentError(const absl::Status& status);

}  // namespace gdr::agent
