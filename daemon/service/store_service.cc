#include "daemon/service/store_service.h"

#include <deque>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/base/completion_batch.h"
#include "common/base/crc32c.h"
#include "common/grpc/grpc_status.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/wire/stream_limits.h"
#include "common/grpc/write_queue.h"
#include "daemon/service/client_stats.h"
#include "daemon/store/mapping_guard.h"

namespace gdr {

namespace v1 = gdrstore::v1;

StoreService::StoreService(const Store* store, TransportSet* transports, ServiceLimits limits,
                           ServiceExtras extras)
    : store_(store),
      transports_(transports),
      limits_(limits),
      max_op_bytes_(limits.max_op_bytes),
      max_inflight_per_stream_(limits.max_inflight_per_stream),
      extras_(std::move(extras)),
      limiter_(limits.max_inflight_ops, limits.max_inflight_bytes) {}

void StoreService::UpdateLimits(const ServiceLimits& limits) {
  absl::MutexLock lock(&limits_mu_);
  limits_.max_op_bytes = limits.max_op_bytes;
  limits_.max_inflight_per_stream = limits.max_inflight_per_stream;
  limits_.max_inflight_ops = limits.max_inflight_ops;
  limits_.max_inflight_bytes = limits.max_inflight_bytes;
  max_op_bytes_.store(limits.max_op_bytes);
  max_inflight_per_stream_.store(limits.max_inflight_per_stream);
  limiter_.SetLimits(limits.max_inflight_ops, limits.max_inflight_bytes);
}

ServiceLimits StoreService::limits() const {
  absl::MutexLock lock(&limits_mu_);
  return limits_;
}

namespace {

// Refusals a client can cause at line rate are logged at most every few seconds (the counts
// are in GetStats); pressure and shutdown refusals are expected and only counted.
void LogRefusal(const absl::Status& s) {
  if (absl::IsResourceExhausted(s) || absl::IsUnavailable(s) || absl::IsCancelled(s)) return;
  GDR_LOG_EVERY_N_SEC(kWarning, 10) << "refused op: " << s;
}

}  // namespace

absl::StatusOr<Submission> StoreService::Prepare(Direction direction, const v1::Extent* extent,
                                                 const v1::RemoteBuffer* buffer, bool sync,
                                                 absl::string_view peer,
                                                 absl::string_view client, Done done) {
  DaemonStats* stats = extras_.stats;
  OpScopes scopes;
  if (stats != nullptr) {
    scopes = stats->Resolve(buffer ? TransportOfEndpoint(buffer->endpoint_case()) : std::nullopt,
                            extent ? absl::string_view(extent->volume()) : absl::string_view(),
                            client);
  }
  auto refuse = [&](absl::Status s) {
    if (stats != nullptr) stats->Finished(scopes, direction, s.code(), 0, 0, /*started=*/false);
    LogRefusal(s);
    return s;
  };
  if (draining_.load(std::memory_order_relaxed)) {
    return refuse(absl::UnavailableError("daemon is shutting down; no new ops are accepted"));
  }
  Submission sub;
  {
    absl::StatusOr<TransferOp> op = ValidateOp(direction, extent, buffer, *store_,
                                               max_op_bytes_.load(std::memory_order_relaxed),
                                               *transports_);
    if (!op.ok()) return refuse(op.status());
    sub.op = *std::move(op);
    sub.op.caller = std::string(peer);
    sub.op.client = std::string(client);
  }
  // The op's start, read once: its service time, a stall's hold and its slot on the simulated
  // media are all measured from this one instant (a stall measured from an earlier reading
  // once let the daemon answer, and report, less than the stall's delay).
  const int64_t start = absl::GetCurrentTimeNanos();
  FaultDecision fault;
  if (extras_.faults != nullptr) {
    fault = extras_.faults->Decide(absl::FromUnixNanos(start), direction, sub.op.transport,
                                   sub.op.volume, sub.op.offset, sub.op.length,
                                   FaultClient{client, peer});
    if (!fault.error.ok()) return refuse(fault.error);
    sub.op.inject = fault.transport;
  }
  InflightLimiter::Permit permit;
  if (absl::Status s = limiter_.TryAcquire(sub.op.length, &permit); !s.ok()) return refuse(s);
  // File volumes with sync=true: msync on the sync worker before answering.
  const Volume* sync_volume = SyncVolume(direction, extent, sync);
  // Simulated media: the op may not complete before its slot on the volume's device ends.
  absl::Time media_done = absl::InfinitePast();
  if (extras_.media != nullptr && extras_.delays != nullptr) {
    if (MediaModel* m = extras_.media->Find(sub.op.volume)) {
      media_done = m->Reserve(direction == Direction::kStoreToClient ? MediaDirection::kRead
                                                                      : MediaDirection::kWrite,
                              sub.op.length, absl::FromUnixNanos(start));
    }
  }
  const uint64_t length = sub.op.length;
  const uint64_t offset = sub.op.offset;
  if (stats != nullptr) stats->Started(scopes, length);
  auto shared_permit = std::make_shared<InflightLimiter::Permit>(std::move(permit));
  // The last step of every op: give back the permit, account, trace, answer.
  auto finish = std::make_shared<std::function<void(absl::Status)>>(
      [done = std::move(done), start, shared_permit, stats, scopes, direction, length,
       traced = TracedOp(extras_.trace, sub.op, start)](absl::Status s) mutable {
        shared_permit->Release();
        const uint64_t ns = static_cast<uint64_t>(absl::GetCurrentTimeNanos() - start);
        if (stats != nullptr) stats->Finished(scopes, direction, s.code(), length, ns, true);
        traced.Finish(s.code(), ns);
        if (!s.ok() && !absl::IsCancelled(s)) {
          GDR_LOG_EVERY_N_SEC(kWarning, 5) << "op failed: " << s;
        }
        done(std::move(s), ns);
      });
  DelayQueue* delays = extras_.delays;
  SyncWorker* syncer = extras_.syncer;
  auto after_transfer = [finish, media_done, delays, stall = fault.stall](absl::Status s) {
    if (s.ok() && delays != nullptr && stall != nullptr) {
      // Held while its stall rules stand (a rule cleared meanwhile lets it go at once).
      stall->Arm(delays, media_done, [finish, s] { (*finish)(s); });
      return;
    }
    if (s.ok() && delays != nullptr && media_done > absl::Now()) {
      delays->RunAt(media_done, [finish, s] { (*finish)(s); });
      return;
    }
    (*finish)(std::move(s));
  };
  std::function<void(absl::Status)> transferred = after_transfer;
  if (fault.corrupt.has_value()) {
    transferred = [this, after_transfer, op = sub.op, draw = *fault.corrupt](absl::Status s) {
      if (!s.ok()) return after_transfer(std::move(s));
      DeliverCorruptByte(op, draw, after_transfer);
    };
  }
  sub.done = [after_transfer = std::move(transferred), sync_volume, syncer, offset,
              length](absl::Status s) {
    if (s.ok() && sync_volume != nullptr) {
      syncer->Post([after_transfer, sync_volume, offset, length] {
        after_transfer(sync_volume->Sync(offset, length));
      });
      return;
    }
    after_transfer(std::move(s));
  };
  return sub;
}

void StoreService::CountRefused(const Submission& sub) {
  LogRefusal(sub.status);
  if (extras_.stats == nullptr || sub.status.ok()) return;
  // Prepare counted the op as started: close it as failed with the initiator's reason.
  const OpScopes scopes = extras_.stats->Resolve(sub.op.transport, sub.op.volume, sub.op.client);
  extras_.stats->Finished(scopes, sub.op.direction, sub.status.code(), sub.op.length, 0, true);
}

void StoreService::DeliverCorruptByte(const TransferOp& op, uint64_t draw, OpDone done) {
  const Volume& source = store_->fault_source();
  const uint64_t at = (draw >> 3) % op.length;
  // A read of the volume's mapping, guarded as every copy out of a file volume is.
  uint8_t stored = 0;
  if (std::optional<const void*> fault =
          RunGuarded([&stored, &op, at] { stored = static_cast<uint8_t>(op.local[at]); })) {
    done(MappingFaultStatus(*fault));
    return;
  }
  const auto flipped = static_cast<uint8_t>(stored ^ (1u << (draw & 7)));
  TransferOp one = op;
  one.volume = source.name();
  one.offset = flipped;
  one.local = source.data() + flipped;  // the source holds every byte value at its own offset
  one.length = 1;
  one.remote_address = op.remote_address + at;
  one.inject = InjectedFault::kNone;
  absl::Status s = transports_->Submit(one, [done](absl::Status st) {
    done(st.ok() ? absl::OkStatus()
                 : absl::Status(st.code(), absl::StrCat("delivering an injected corrupt byte: ",
                                                        st.message())));
  });
  if (!s.ok()) done(s);
}

void StoreService::CountUnstarted(absl::StatusCode code) {
  if (extras_.stats == nullptr) return;
  extras_.stats->Finished(OpScopes{}, Direction::kStoreToClient, code, 0, 0, /*started=*/false);
}

const Volume* StoreService::SyncVolume(Direction direction, const v1::Extent* extent,
                                       bool sync) const {
  if (!sync || direction != Direction::kClientToStore || extras_.syncer == nullptr ||
      extent == nullptr) {
    return nullptr;
  }
  const Volume* v = store_->Find(extent->volume());
  return v != nullptr && !v->file().empty() ? v : nullptr;
}

absl::Status StoreService::StartOp(Direction direction, const v1::Extent* extent,
                                   const v1::RemoteBuffer* buffer, bool sync,
                                   absl::string_view peer, absl::string_view client,
                                   Done done) {
  GDR_ASSIGN_OR_RETURN(Submission sub,
                       Prepare(direction, extent, buffer, sync, peer, client, std::move(done)));
  sub.status = transports_->Submit(sub.op, std::move(sub.done));
  if (!sub.status.ok()) CountRefused(sub);
  return sub.status;
}

namespace {

// A bidi call refused before it started: finishes at once with the reason.
template <class Request, class Response>
class RefusedBidi final : public grpc::ServerBidiReactor<Request, Response> {
 public:
  explicit RefusedBidi(const grpc::Status& s) { this->Finish(s); }
  void OnDone() override { delete this; }
};

}  // namespace

void StoreService::SetTokens(std::vector<Credential> credentials) {
  for (const Credential& c : credentials) {
    if (c.kind == Credential::Kind::kSan && !auth_.client_certificates_verified()) {
      GDR_LOG(kWarning) << "token file: credential '" << c.label
                        << "' names a client certificate, but this daemon verifies none "
                           "(mTLS with a client CA is off): it matches no call";
    }
    for (const VolumeSet* set : {&c.get, &c.put}) {
      for (const std::string& name : set->names) {
        if (store_->Find(name) == nullptr) {
          GDR_LOG(kWarning) << "token file: credential '" << c.label << "' is granted volume '"
                            << name << "', which this daemon does not have";
        }
      }
    }
  }
  auth_.Set(std::move(credentials));
}

grpc::ServerUnaryReactor* StoreService::RefuseUnauthorized(grpc::CallbackServerContext* ctx,
                                                           Caller* caller) {
  absl::StatusOr<Caller> c = auth_.Check(*ctx);
  if (c.ok()) {
    if (caller != nullptr) *caller = *std::move(c);
    return nullptr;
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(c.status()));
  return reactor;
}

absl::Status StoreService::CheckGrant(const Caller& caller, Direction direction,
                                      const v1::Extent* extent) {
  if (extent == nullptr) return absl::OkStatus();
  absl::Status s = caller.Allows(
      extent->volume(), direction == Direction::kStoreToClient ? Right::kGet : Right::kPut);
  if (!s.ok()) {
    // Counted in the totals only: per-volume figures belong to those who may see the volume.
    CountUnstarted(s.code());
    LogRefusal(s);
  }
  return s;
}

grpc::ServerUnaryReactor* StoreService::UnaryOp(grpc::CallbackServerContext* ctx,
                                                Direction direction, const v1::Extent* extent,
                                                const v1::RemoteBuffer* buffer,
                                                v1::OpResponse* response, bool sync,
                                                bool crc) {
  Caller caller;
  if (grpc::ServerUnaryReactor* refused = RefuseUnauthorized(ctx, &caller)) return refused;
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status s = CheckGrant(caller, direction, extent); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  const uint64_t length = extent ? extent->length() : 0;
  const bool synced = SyncsToFile(direction, extent, sync);
  // The request outlives the call, so the extent may be read when the op completes.
  const v1::Extent* crc_of = crc ? extent : nullptr;
  const std::string peer = ctx->peer();
  absl::Status s =
      StartOp(direction, extent, buffer, sync, peer, ClientIdentity(caller.label(), peer),
              [this, reactor, response, length, synced, crc_of](absl::Status st, uint64_t ns) {
                if (st.ok()) {
                  response->set_bytes(length);
                  response->set_service_ns(ns);
                  response->set_synced(synced);
                  if (crc_of != nullptr) {
                    if (std::optional<uint32_t> c = ExtentCrc32c(*crc_of)) {
                      response->set_crc32c(*c);
                    }
                  }
                }
                reactor->Finish(ToGrpcStatus(st));
              });
  if (!s.ok()) {
    // Refused before it started for want of room: the client may send it again (grpc_status.h).
    if (IsNotAdmitted(s)) ctx->AddTrailingMetadata(kNotAdmittedKey, "1");
    reactor->Finish(ToGrpcStatus(s));
  }
  return reactor;
}

grpc::ServerUnaryReactor* StoreService::Write(grpc::CallbackServerContext* ctx,
                                              const v1::WriteRequest* request,
                                              v1::OpResponse* response) {
  return UnaryOp(ctx, Direction::kStoreToClient,
                 request->has_extent() ? &request->extent() : nullptr,
                 request->has_buffer() ? &request->buffer() : nullptr, response, false,
                 request->crc32c());
}

grpc::ServerUnaryReactor* StoreService::Read(grpc::CallbackServerContext* ctx,
                                             const v1::ReadRequest* request,
                                             v1::OpResponse* response) {
  return UnaryOp(ctx, Direction::kClientToStore,
                 request->has_extent() ? &request->extent() : nullptr,
                 request->has_buffer() ? &request->buffer() : nullptr, response, request->sync(),
                 request->crc32c());
}

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
      if (batch_[k].status.ok()) continue;
      service_->CountRefused(batch_[k]);
      Answer(batch_ids_[k], batch_[k].status, 0, 0, true);
    }
    batch_.clear();  // drops refused ops' callbacks, giving their permits back
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
    absl::StatusOr<Submission> sub = service_->Prepare(
        direction, extent, buffer, sync, peer_, client_,
        [this, id, length, synced, crc_of = std::move(crc_of)](absl::Status st, uint64_t ns) {
          std::optional<uint32_t> c;
          if (st.ok() && crc_of) c = service_->ExtentCrc32c(*crc_of);
          Answer(id, st, st.ok() ? length : 0, ns, true, synced && st.ok(), c);
        });
    if (!sub.ok()) {
      Answer(id, sub.status(), 0, 0, true);
      return;
    }
    batch_.push_back(*std::move(sub));
    batch_ids_.push_back(id);
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

grpc::ServerUnaryReactor* StoreService::GetInfo(grpc::CallbackServerContext* ctx,
                                                const v1::GetInfoRequest* request,
                                                v1::GetInfoResponse* response) {
  Caller caller;
  if (grpc::ServerUnaryReactor* refused = RefuseUnauthorized(ctx, &caller)) return refused;
  response->set_version(GDR_VERSION);
  transports_->FillInfo(response);
  for (const auto& [name, volume] : store_->volumes()) {
    if (!caller.MaySee(name)) continue;  // volumes without a grant are not shown
    auto* vi = response->add_volumes();
    vi->set_name(name);
    vi->set_size(volume->size());
    vi->set_backing(volume->file().empty() ? "memory" : absl::StrCat("file:", volume->file()));
  }
  const ServiceLimits limits = this->limits();
  auto* l = response->mutable_limits();
  l->set_max_op_bytes(limits.max_op_bytes);
  l->set_max_inflight_per_stream(limits.max_inflight_per_stream);
  l->set_max_inflight_ops(limits.max_inflight_ops);
  l->set_max_inflight_bytes(limits.max_inflight_bytes);
  l->set_chunk_bytes(limits.chunk_bytes);
  l->set_max_links(limits.max_links);
  if (tls_info_) {
    *response->mutable_tls() = tls_info_();
  } else {
    response->mutable_tls()->set_enabled(false);
  }
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerBidiReactor<v1::ConnectRequest, v1::ConnectResponse>* StoreService::Connect(
    grpc::CallbackServerContext* ctx) {
  using Refuse = RefusedBidi<v1::ConnectRequest, v1::ConnectResponse>;
  // A credential is needed, no volume right: the ops on the connection are checked one by one.
  if (absl::StatusOr<Caller> c = auth_.Check(*ctx); !c.ok()) {
    return new Refuse(ToGrpcStatus(c.status()));
  }
  if (draining_.load()) {
    return new Refuse(grpc::Status(grpc::StatusCode::UNAVAILABLE, "daemon is shutting down"));
  }
  if (connect_ != nullptr) return connect_->Open(ctx);
  return new Refuse(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                 "no transport of this daemon takes Connect calls (rc is not "
                                 "running; see GetInfo)"));
}

grpc::ServerUnaryReactor* StoreService::Ping(grpc::CallbackServerContext* ctx,
                                             const v1::PingRequest* request,
                                             v1::PingResponse* response) {
  if (grpc::ServerUnaryReactor* refused = RefuseUnauthorized(ctx)) return refused;
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

std::optional<uint32_t> StoreService::ExtentCrc32c(const v1::Extent& extent) const {
  const Volume* v = store_->Find(extent.volume());
  if (v == nullptr || extent.offset() > v->size() ||
      extent.length() > v->size() - extent.offset()) {
    return std::nullopt;
  }
  // Read from the volume's mapping: a file truncated under it since the op passed validation
  // faults here (SIGBUS); then the answer goes without the checksum (the client fails the op)
  // rather than the daemon down.
  std::optional<uint32_t> crc;
  const std::byte* bytes = v->data() + extent.offset();
  if (RunGuarded([&crc, bytes, &extent] { crc = Crc32c(bytes, extent.length()); })) {
    return std::nullopt;
  }
  return crc;
}

}  // namespace gdr
