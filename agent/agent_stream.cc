// The Stream RPC as the agent serves it: one reactor per call, many ops per message, each
// forwarded upstream as it arrives and answered in completion order, as the daemon does.
#include <algorithm>
#include <deque>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent_service.h"
#include "common/grpc/grpc_status.h"
#include "common/grpc/write_queue.h"
#include "common/wire/stream_limits.h"

namespace gdr::agent {

namespace v1 = gdrstore::v1;

// One Stream call. Reads request messages back to back (never waiting for answers) and starts
// every op of them on the call's upstream lane, so that the ops of one message leave in one
// upstream message too. Answers accumulate while a write is outstanding and go out together.
// Finishes once the client has closed its side and every op is answered; lives until OnDone.
class AgentService::StreamCall final
    : public grpc::ServerBidiReactor<v1::StreamRequest, v1::StreamResponse> {
 public:
  // `session` (0: unknown) has counted this call against its limit (BeginStream).
  StreamCall(AgentService* service, grpc::CallbackServerContext* ctx, uint64_t session)
      : service_(service),
        session_(session),
        lane_(service->upstream_->PickLane()),
        deadline_(ctx->deadline()),
        // The queue runs this under mu_, which every caller of the queue holds.
        writes_([this](std::deque<v1::StreamResult>& unsent) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                  return StartWriteLocked(unsent);
                },
                [this](bool all_written) { Finish(grpc::Status::OK); }) {
    service_->streams_.fetch_add(1);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      absl::MutexLock lock(&mu_);
      reads_done_ = true;
      MaybeFinishLocked();
      return;
    }
    for (int i = 0; i < request_.ops_size(); ++i) {
      if (i >= kMaxOpsPerMessage) {
        service_->sessions_->CountRefused(absl::StatusCode::kInvalidArgument);
        Answer(request_.ops(i).id(),
               AgentError(absl::InvalidArgumentError(absl::StrCat(
                   "more than ", kMaxOpsPerMessage, " ops in one StreamRequest; op not started"))),
               false);
        continue;
      }
      StartOne(request_.ops(i));
    }
    absl::MutexLock lock(&mu_);
    // A client that sends but does not read its answers must not grow the queue without bound.
    if (writes_.queued() >= QueueCap()) {
      read_paused_ = true;
      return;
    }
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writes_.OnWriteDone(ok);  // a failed write: the client is gone, the queue discards
    if (read_paused_ && (writes_.discarded() || writes_.queued() < QueueCap() / 2)) {
      read_paused_ = false;
      StartRead(&request_);
    }
    MaybeFinishLocked();
  }

  void OnDone() override {
    service_->streams_.fetch_sub(1);
    service_->EndStream(session_);
    delete this;
  }

 private:
  void StartOne(const v1::StreamOp& op) {
    const uint64_t id = op.id();
    bool write = true, sync = false, crc = false;
    const v1::Extent* extent = nullptr;
    const v1::RemoteBuffer* buffer = nullptr;
    switch (op.op_case()) {
      case v1::StreamOp::kWrite:
        if (op.write().has_extent()) extent = &op.write().extent();
        if (op.write().has_buffer()) buffer = &op.write().buffer();
        crc = op.write().crc32c();
        break;
      case v1::StreamOp::kRead:
        write = false;
        if (op.read().has_extent()) extent = &op.read().extent();
        if (op.read().has_buffer()) buffer = &op.read().buffer();
        sync = op.read().sync();
        crc = op.read().crc32c();
        break;
      case v1::StreamOp::OP_NOT_SET:
        service_->sessions_->CountRefused(absl::StatusCode::kInvalidArgument);
        Answer(id, AgentError(absl::InvalidArgumentError("stream op has no write or read set")),
               false);
        return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (!inflight_ids_.insert(id).second) {
        service_->sessions_->CountRefused(absl::StatusCode::kInvalidArgument);
        PushLocked(id, AgentError(absl::InvalidArgumentError(absl::StrCat(
                           "stream op id ", id, " is already in flight on this stream"))));
        return;
      }
    }
    // May answer inline (a refusal), so no lock is held here.
    service_->StartOp(write, extent, buffer, sync, crc, deadline_, lane_,
                      [this, id](absl::StatusOr<gdrstore::OpResult> r) {
                        Answer(id, std::move(r), true);
                      });
  }

  void Answer(uint64_t id, absl::StatusOr<gdrstore::OpResult> result, bool was_inflight) {
    absl::MutexLock lock(&mu_);
    if (was_inflight) inflight_ids_.erase(id);
    PushLocked(id, std::move(result));
    MaybeFinishLocked();
  }

  void PushLocked(uint64_t id, absl::StatusOr<gdrstore::OpResult> result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writes_.discarded()) return;
    v1::StreamResult r;
    r.set_id(id);
    if (result.ok()) {
      r.set_bytes(result->bytes);
      r.set_service_ns(result->service_ns);
      r.set_synced(result->synced);
      if (result->crc32c) r.set_crc32c(*result->crc32c);
      r.set_path(std::move(result->path));  // the client puts its hop before it
    } else {
      r.set_code(static_cast<int32_t>(result.status().code()));
      r.set_message(std::string(result.status().message()));
      if (IsNotAdmitted(result.status())) r.set_not_admitted(true);
    }
    writes_.Push(std::move(r));
  }

  // Packs the answers ready so far, up to a message's worth, into out_ and writes it.
  size_t StartWriteLocked(std::deque<v1::StreamResult>& unsent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    out_.Clear();
    const size_t n = std::min<size_t>(unsent.size(), kMaxOpsPerMessage);
    out_.mutable_results()->Reserve(static_cast<int>(n));
    for (size_t i = 0; i < n; ++i) *out_.add_results() = std::move(unsent[i]);
    StartWrite(&out_);
    return n;
  }

  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!reads_done_ || !inflight_ids_.empty()) return;
    writes_.EndWhenDrained();
  }

  size_t QueueCap() const { return 2 * size_t{service_->sessions_->max_ops_per_session()} + 64; }

  AgentService* const service_;
  const uint64_t session_;
  const uint32_t lane_;  // the upstream Stream this call's ops ride
  const std::chrono::system_clock::time_point deadline_;  // the call's; max: none
  v1::StreamRequest request_;  // touched only by the read callbacks, which never overlap
  absl::Mutex mu_;
  v1::StreamResponse out_ ABSL_GUARDED_BY(mu_);  // the message being written
  WriteQueue<v1::StreamResult> writes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> inflight_ids_ ABSL_GUARDED_BY(mu_);
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
};

grpc::ServerBidiReactor<v1::StreamRequest, v1::StreamResponse>* AgentService::Stream(
    grpc::CallbackServerContext* ctx) {
  // Each Stream holds a reactor and its buffers for as long as the client keeps it open.
  const uint64_t session = Caller(*ctx).value_or(ChannelOwner{}).session;
  if (absl::Status s = BeginStream(session); !s.ok()) {
    sessions_->CountRefused(s.code());
    return RefusedStream(ToGrpcStatus(AgentError(s)));
  }
  return new StreamCall(this, ctx, session);
}

}  // namespace gdr::agent
