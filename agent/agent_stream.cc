// The Stream RPC as the agent serves it: what the shared reactor
// (common/grpc/stream_reactor.h) does with each op here: forwarded upstream as it arrives, on
// the call's one upstream lane, and answered in completion order, as the daemon does.
#include "absl/strings/str_cat.h"
#include "agent/agent_service.h"
#include "common/grpc/stream_reactor.h"

namespace gdr::agent {

namespace v1 = gdrstore::v1;

// One Stream call's ops. Every op starts on the call's upstream lane, so that the ops of one
// message leave in one upstream message too.
class AgentService::StreamCall final : public StreamHandler {
 public:
  // `session` (0: unknown) has counted this call against its limit (BeginStream).
  StreamCall(AgentService* service, grpc::CallbackServerContext* ctx, uint64_t session)
      : service_(service),
        session_(session),
        lane_(service->upstream_->PickLane()),
        deadline_(ctx->deadline()) {
    service_->streams_.fetch_add(1);
  }
  ~StreamCall() override {
    service_->streams_.fetch_sub(1);
    service_->EndStream(session_);
  }

  absl::Status Refused(absl::Status status) override {
    service_->sessions_->CountRefused(status.code());
    return AgentError(status);
  }

  void Start(const StreamOpRequest& op, StreamReactor* reactor) override {
    service_->StartOp(op.write, op.extent, op.buffer, op.sync, op.crc, deadline_, lane_,
                      [reactor, id = op.id](absl::StatusOr<gdrstore::OpResult> r) {
                        if (!r.ok()) {
                          reactor->Finished(id, r.status());
                          return;
                        }
                        StreamAnswer a;
                        a.bytes = r->bytes;
                        a.service_ns = r->service_ns;
                        a.synced = r->synced;
                        a.crc32c = r->crc32c;
                        a.path = std::move(r->path);
                        reactor->Finished(id, std::move(a));
                      });
  }

  size_t QueueCap() const override {
    return 2 * size_t{service_->sessions_->max_ops_per_session()} + 64;
  }

 private:
  AgentService* const service_;
  const uint64_t session_;
  const uint32_t lane_;  // the upstream Stream this call's ops ride
  const std::chrono::system_clock::time_point deadline_;  // the call's; max: none
};

absl::StatusOr<std::unique_ptr<StreamHandler>> AgentService::OpenStream(
    grpc::CallbackServerContext* ctx) {
  const uint64_t session = Caller(*ctx).value_or(ChannelOwner{}).session;
  if (absl::Status s = BeginStream(session); !s.ok()) {
    sessions_->CountRefused(s.code());
    return AgentError(s);
  }
  return std::make_unique<StreamCall>(this, ctx, session);
}

}  // namespace gdr::agent
