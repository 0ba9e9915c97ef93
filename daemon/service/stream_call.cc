// The Stream RPC as the daemon serves it: what the shared reactor (common/grpc/stream_reactor.h)
// does with each op here: rights, the per-stream limit, validation and admission, and the
// admitted ops of one message handed to the initiator as one batch.
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_status.h"
#include "common/grpc/stream_reactor.h"
#include "daemon/observe/client_stats.h"
#include "daemon/service/store_service.h"

namespace gdr {

namespace v1 = gdrstore::v1;

// One Stream call's ops. Answers delivered in one burst (a link receiver draining its buffer, a
// poller's batch of CQEs) start at most one write, when the burst ends (the reactor batches).
class StoreService::StreamCall final : public StreamHandler {
 public:
  StreamCall(StoreService* service, Presented presented, Caller caller, std::string peer)
      : service_(service),
        presented_(std::move(presented)),
        caller_(std::move(caller)),
        identified_at_(caller_->generation()),
        peer_(std::move(peer)),
        client_(ClientIdentity(caller_->label(), peer_)) {
    service_->streams_.fetch_add(1);
  }
  ~StreamCall() override { service_->streams_.fetch_sub(1); }

  absl::Status Refused(absl::Status status) override {
    service_->CountUnstarted(status.code());
    return status;
  }

  // After a reload (SIGHUP) the caller is identified again, so that changed grants, and a
  // credential taken away, apply to the ops of an open stream from its next message on.
  void BeginMessage() override {
    batch_.clear();
    batch_ids_.clear();
    batch_tickets_.clear();
    const uint64_t now = service_->auth_.generation();
    if (now == identified_at_) return;
    // A reload racing with this lookup only makes the next message look again.
    caller_ = service_->auth_.Identify(presented_);
    identified_at_ = now;
    if (caller_.ok()) client_ = ClientIdentity(caller_->label(), peer_);
  }

  // Rights first: a refused op fails alone, before anything about it is looked at.
  absl::Status Check(const StreamOpRequest& op) override {
    if (!caller_.ok()) {
      service_->CountUnstarted(caller_.status().code());
      return caller_.status();
    }
    // The grant stage, before the per-stream limit and validation.
    return service_->pipeline_.Request({*caller_, DirectionOf(op), op.extent});
  }

  absl::Status Room(size_t inflight) override {
    if (inflight < service_->max_inflight_per_stream()) return absl::OkStatus();
    return NotAdmittedError(absl::StrCat("stream has ", inflight,
                                         " ops in flight (max_inflight_per_stream); wait for "
                                         "answers"));
  }

  // Validates and admits one op into the batch, or answers it at once.
  void Start(const StreamOpRequest& op, StreamReactor* reactor) override {
    const Direction direction = DirectionOf(op);
    const uint64_t id = op.id;
    const uint64_t length = op.extent ? op.extent->length() : 0;
    const bool synced = service_->SyncsToFile(direction, op.extent, op.sync);
    absl::StatusOr<PreparedOp> prepared = service_->Prepare(
        direction, op.extent, op.buffer, op.sync, op.crc, peer_, client_,
        [reactor, id, length, synced](OpAnswer answer) {
          const bool ok = answer.status.ok();
          StreamAnswer a(std::move(answer.status));
          a.bytes = ok ? length : 0;
          a.service_ns = answer.service_ns;
          a.synced = synced && ok;
          a.crc32c = answer.crc32c;
          a.data = std::move(answer.data);
          reactor->Finished(id, std::move(a));
        });
    if (!prepared.ok()) {
      reactor->Finished(id, prepared.status());
      return;
    }
    batch_.push_back(std::move(prepared->sub));
    batch_ids_.push_back(id);
    batch_tickets_.push_back(std::move(prepared->ticket));
  }

  // The admitted ops of the message go to the initiator as one batch, so ops bound for one
  // client leave in one send / one doorbell.
  void EndMessage(StreamReactor* reactor) override {
    service_->transports_->SubmitBatch(batch_);
    for (size_t k = 0; k < batch_.size(); ++k) {
      // A refused op is refused through the pipeline (counted, its permit given back).
      batch_tickets_[k].Submitted(batch_[k].status);
      if (!batch_[k].status.ok()) reactor->Finished(batch_ids_[k], batch_[k].status);
    }
    batch_.clear();
    batch_tickets_.clear();
  }

  size_t QueueCap() const override {
    return 2 * size_t{service_->max_inflight_per_stream()} + 64;
  }

 private:
  static Direction DirectionOf(const StreamOpRequest& op) {
    return op.write ? Direction::kStoreToClient : Direction::kClientToStore;
  }

  StoreService* const service_;
  // Who the stream's ops come from; touched only by the read callbacks.
  const Presented presented_;
  absl::StatusOr<Caller> caller_;  // not OK: the credential is no longer accepted
  uint64_t identified_at_;         // the auth generation caller_ was resolved in
  const std::string peer_;         // the call's peer address, for every op of it
  std::string client_;             // who its ops are counted under (ClientIdentity)
  std::vector<Submission> batch_;  // likewise: the ops of the message being submitted
  std::vector<uint64_t> batch_ids_;
  std::vector<OpTicket> batch_tickets_;
};

absl::StatusOr<std::unique_ptr<StreamHandler>> StoreService::OpenStream(
    grpc::CallbackServerContext* ctx) {
  Presented presented = Presented::Of(*ctx);
  absl::StatusOr<Caller> caller = auth_.Identify(presented);
  if (!caller.ok()) return caller.status();
  return std::make_unique<StreamCall>(this, std::move(presented), *std::move(caller),
                                      ctx->peer());
}

}  // namespace gdr
