// The Stream RPC: one reactor per call, many ops per message, answers in completion order.
#include <deque>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/completion_batch.h"
#include "common/grpc/grpc_status.h"
#include "common/grpc/write_queue.h"
#include "common/wire/stream_limits.h"
#include "daemon/observe/client_stats.h"
#include "daemon/service/refused_bidi.h"
#include "daemon/service/store_service.h"

namespace gdr {

namespace v1 = gdrstore::v1;

// One Stream call. Reads request messages back to back (never waiting for completions) and
// starts every op in them; answers accumulate while a write is outstanding and go out together
// in the next StreamResponse, so under load many answers share one message. Answers delivered
// in one burst (a link receiver draining its buffer, a poller's batch of CQEs) start at most one
// write, when the burst ends (CompletionBatch). Exactly one write is outstanding at a time
// (a WriteQueue under mu_). Finishes once the client has closed its side and every op is
// answered. Lives until OnDone.
class StoreService::StreamCall final
    : public grpc::ServerBidiReactor<v1::StreamRequest, v1::StreamResponse> {
 public:
  StreamCall(StoreService* service, Presented presented, Caller caller, std::string peer)
      : service_(service),
        presented_(std::move(presented)),
        caller_(std::move(caller)),
        identified_at_(caller_->generation()),
        peer_(std::move(peer)),
        client_(ClientIdentity(caller_->label(), peer_)),
        writes_([this](std::deque<v1::StreamResult>& unsent) { return StartWriteLocked(unsent); },
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
    // Every op of the message is validated first and the admitted ones go to the initiator
    // as one batch, so ops bound for one client leave in one send / one doorbell. Answers given
    // while doing so (refusals) leave together, in one message.
    CompletionBatch answers;
    batch_.clear();
    batch_ids_.clear();
    batch_tickets_.clear();
    RefreshCaller();
    for (int i = 0; i < request_.ops_size(); ++i) {
      if (i >= kMaxOpsPerMessage) {
        service_->CountUnstarted(absl::StatusCode::kInvalidArgument);
        Answer(request_.ops(i).id(),
               absl::InvalidArgumentError(absl::StrCat(
                   "more than ", kMaxOpsPerMessage, " ops in one StreamRequest; op not started")),
               0, 0);
        continue;
      }
      PrepareOp(request_.ops(i));
    }
    service_->transports_->SubmitBatch(batch_);
    for (size_t k = 0; k < batch_.size(); ++k) {
      // A refused op is refused through the pipeline (counted, its permit given back).
      batch_tickets_[k].Submitted(batch_[k].status);
      if (!batch_[k].status.ok()) Answer(batch_ids_[k], batch_[k].status, 0, 0, true);
    }
    batch_.clear();
    batch_tickets_.clear();
    absl::MutexLock lock(&mu_);
    // A client that sends but does not read its answers must not grow the queue without bound:
    // stop reading until the answers drain.
    if (writes_.queued() >= QueueCap()) {
      read_paused_ = true;
      return;
    }
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    // A failed write: the client is gone, nothing more can be delivered (the queue discards).
    writes_.OnWriteDone(ok);
    if (read_paused_ && (writes_.discarded() || writes_.queued() < QueueCap() / 2)) {
      read_paused_ = false;
      StartRead(&request_);
    }
    MaybeFinishLocked();
  }

  void OnDone() override {
    service_->streams_.fetch_sub(1);
    delete this;
  }

 private:
  // After a reload (SIGHUP) the caller is identified again, so that changed grants, and a
  // credential taken away, apply to the ops of an open stream from its next message on.
  void RefreshCaller() {
    const uint64_t now = service_->auth_.generation();
    if (now == identified_at_) return;
    // A reload racing with this lookup only makes the next message look again.
    caller_ = service_->auth_.Identify(presented_);
    identified_at_ = now;
    if (caller_.ok()) client_ = ClientIdentity(caller_->label(), peer_);
  }

  // Validates and admits one op into batch_, or answers it at once.
  void PrepareOp(const v1::StreamOp& op) {
    const uint64_t id = op.id();
    Direction direction = Direction::kStoreToClient;
    bool sync = false, crc = false;
    const v1::Extent* extent = nullptr;
    const v1::RemoteBuffer* buffer = nullptr;
    switch (op.op_case()) {
      case v1::StreamOp::kWrite:
        direction = Direction::kStoreToClient;
        if (op.write().has_extent()) extent = &op.write().extent();
        if (op.write().has_buffer()) buffer = &op.write().buffer();
        crc = op.write().crc32c();
        break;
      case v1::StreamOp::kRead:
        direction = Direction::kClientToStore;
        if (op.read().has_extent()) extent = &op.read().extent();
        if (op.read().has_buffer()) buffer = &op.read().buffer();
        sync = op.read().sync();
        crc = op.read().crc32c();
        break;
      case v1::StreamOp::OP_NOT_SET:
        service_->CountUnstarted(absl::StatusCode::kInvalidArgument);
        Answer(id, absl::InvalidArgumentError("stream op has no write or read set"), 0, 0);
        return;
    }
    // Rights first: a refused op fails alone, before anything about it is looked at.
    if (!caller_.ok()) {
      service_->CountUnstarted(caller_.status().code());
      Answer(id, caller_.status(), 0, 0);
      return;
    }
    if (absl::Status s = service_->CheckGrant(*caller_, direction, extent); !s.ok()) {
      Answer(id, s, 0, 0);
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      if (inflight_ids_.size() >= service_->max_inflight_per_stream()) {
        service_->CountUnstarted(absl::StatusCode::kResourceExhausted);
        PushLocked(id, NotAdmittedError(absl::StrCat(
                           "stream has ", inflight_ids_.size(),
                           " ops in flight (max_inflight_per_stream); wait for answers")), 0, 0);
        return;
      }
      if (!inflight_ids_.insert(id).second) {
        service_->CountUnstarted(absl::StatusCode::kInvalidArgument);
        PushLocked(id, absl::InvalidArgumentError(absl::StrCat(
                           "stream op id ", id, " is already in flight on this stream")), 0, 0);
        return;
      }
    }
    const uint64_t length = extent ? extent->length() : 0;
    const bool synced = service_->SyncsToFile(direction, extent, sync);
    // The op's request message is gone by completion: the extent is copied for the CRC.
    std::optional<v1::Extent> crc_of;
    if (crc && extent != nullptr) crc_of = *extent;
    absl::StatusOr<PreparedOp> prepared = service_->Prepare(
        direction, extent, buffer, sync, peer_, client_,
        [this, id, length, synced, crc_of = std::move(crc_of)](absl::Status st, uint64_t ns) {
          std::optional<uint32_t> c;
          if (st.ok() && crc_of) c = service_->ExtentCrc32c(*crc_of);
          Answer(id, st, st.ok() ? length : 0, ns, true, synced && st.ok(), c);
        });
    if (!prepared.ok()) {
      Answer(id, prepared.status(), 0, 0, true);
      return;
    }
    batch_.push_back(std::move(prepared->sub));
    batch_ids_.push_back(id);
    batch_tickets_.push_back(std::move(prepared->ticket));
  }

  void Answer(uint64_t id, const absl::Status& status, uint64_t bytes, uint64_t ns,
              bool was_inflight = false, bool synced = false,
              std::optional<uint32_t> crc = std::nullopt) {
    absl::MutexLock lock(&mu_);
    if (was_inflight) inflight_ids_.erase(id);
    PushLocked(id, status, bytes, ns, synced, crc);
    MaybeFinishLocked();
  }

  void PushLocked(uint64_t id, const absl::Status& status, uint64_t bytes, uint64_t ns,
                  bool synced = false, std::optional<uint32_t> crc = std::nullopt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writes_.discarded()) return;
    v1::StreamResult r;
    r.set_id(id);
    r.set_code(static_cast<int32_t>(status.code()));
    if (!status.ok()) r.set_message(std::string(status.message()));
    if (IsNotAdmitted(status)) r.set_not_admitted(true);
    r.set_bytes(bytes);
    r.set_service_ns(ns);
    r.set_synced(synced);
    if (crc) r.set_crc32c(*crc);
    writes_.Enqueue(std::move(r));
    if (writes_.writing() || flush_deferred_) return;  // the answer rides the next message
    if (CompletionBatch::Defer(this, [this] {
          absl::MutexLock lock(&mu_);
          flush_deferred_ = false;
          writes_.Flush();
          MaybeFinishLocked();
        })) {
      flush_deferred_ = true;
      return;
    }
    writes_.Flush();
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

  // Once the client has closed its side and every op is answered, the call finishes as soon
  // as the last answer is written.
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!reads_done_ || !inflight_ids_.empty() || flush_deferred_) return;
    writes_.EndWhenDrained();
  }

  size_t QueueCap() const { return 2 * size_t{service_->max_inflight_per_stream()} + 64; }

  StoreService* service_;
  // Who the stream's ops come from; like request_, touched only by the read callbacks.
  const Presented presented_;
  absl::StatusOr<Caller> caller_;  // not OK: the credential is no longer accepted
  uint64_t identified_at_;         // the auth generation caller_ was resolved in
  const std::string peer_;         // the call's peer address, for every op of it
  std::string client_;             // who its ops are counted under (ClientIdentity)
  v1::StreamRequest request_;  // touched only by the read callbacks, which never overlap
  std::vector<Submission> batch_;   // likewise: the ops of request_ being submitted
  std::vector<uint64_t> batch_ids_;
  std::vector<OpTicket> batch_tickets_;
  absl::Mutex mu_;
  v1::StreamResponse out_ ABSL_GUARDED_BY(mu_);  // the message being written
  // Answers not yet in a message; discarded once a write failed (the client is gone).
  WriteQueue<v1::StreamResult> writes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> inflight_ids_ ABSL_GUARDED_BY(mu_);
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  // A CompletionBatch holds a flush of this stream: it must not finish (and be deleted) first.
  bool flush_deferred_ ABSL_GUARDED_BY(mu_) = false;
};

grpc::ServerBidiReactor<v1::StreamRequest, v1::StreamResponse>* StoreService::Stream(
    grpc::CallbackServerContext* ctx) {
  Presented presented = Presented::Of(*ctx);
  absl::StatusOr<Caller> caller = auth_.Identify(presented);
  if (!caller.ok()) {
    return new RefusedBidi<v1::StreamRequest, v1::StreamResponse>(ToGrpcStatus(caller.status()));
  }
  return new StreamCall(this, std::move(presented), *std::move(caller), ctx->peer());
}

}  // namespace gdr
