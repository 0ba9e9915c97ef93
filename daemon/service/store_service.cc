#include "daemon/service/store_service.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/grpc/grpc_status.h"
#include "common/grpc/refused_bidi.h"
#include "common/wire/list_pages.h"
#include "daemon/observe/client_stats.h"
#include "daemon/service/validate_op.h"

namespace gdr {

namespace v1 = gdrstore::v1;

StoreService::StoreService(const Store* store, TransportSet* transports, ServiceLimits limits)
    : GdrStoreServer(/*batch_stream_answers=*/true),
      store_(store),
      transports_(transports),
      limits_(limits),
      max_op_bytes_(limits.max_op_bytes),
      max_inflight_per_stream_(limits.max_inflight_per_stream),
      limiter_(limits.max_inflight_ops, limits.max_inflight_bytes) {}

void StoreService::SetPipeline(std::vector<OpStage*> stages) {
  pipeline_ = OpPipeline(std::move(stages));
  syncs_ = pipeline_.Has("msync");
  // Without them ops would go unchecked against the callers' grants, or answer no CRC.
  for (const OpStage* own : this->stages()) {
    if (!pipeline_.Has(own->name())) {
      GDR_LOG(kError) << "op pipeline without the service's '" << own->name() << "' stage";
      std::abort();
    }
  }
}

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

absl::StatusOr<PreparedOp> StoreService::Prepare(Direction direction, const v1::Extent* extent,
                                                 const v1::RemoteBuffer* buffer, bool sync,
                                                 bool crc, absl::string_view peer,
                                                 absl::string_view client, Done done) {
  auto ctx = std::make_unique<OpContext>(&pipeline_, direction, extent, buffer, sync, crc, peer,
                                         client, std::move(done));
  if (draining_.load(std::memory_order_relaxed)) {
    absl::Status s = absl::UnavailableError("daemon is shutting down; no new ops are accepted");
    pipeline_.Refuse(std::move(ctx), s);
    return s;
  }
  PreparedOp prepared;
  TransferOp& op = prepared.sub.op;
  {
    absl::StatusOr<TransferOp> valid = ValidateOp(direction, extent, buffer, *store_,
                                                  max_op_bytes_.load(std::memory_order_relaxed),
                                                  *transports_);
    if (!valid.ok()) {
      pipeline_.Refuse(std::move(ctx), valid.status());
      return valid.status();
    }
    op = *std::move(valid);
    op.caller = std::string(peer);
    op.client = std::string(client);
  }
  ctx->offset = op.offset;
  ctx->length = op.length;
  // The op's start, read once: its service time, a stall's hold and its slot on the simulated
  // media are all measured from this one instant (a stall measured from an earlier reading
  // once let the daemon answer, and report, less than the stall's delay).
  ctx->start_ns = absl::GetCurrentTimeNanos();
  // A Write's transport may answer it inline (tcp, TcpEndpoint.inline_max): set before the
  // stages see the op, so the fault stage's corrupt byte follows the op's bytes there.
  if (direction == Direction::kStoreToClient) {
    ctx->inline_answer.address = op.remote_address;
    ctx->inline_answer.length = op.length;
    op.inline_answer = &ctx->inline_answer;
  }
  GDR_RETURN_IF_ERROR(pipeline_.Start(ctx, op));
  // From here the op is the pipeline's: its transfer's end walks the stages and answers it.
  OpContext* started = ctx.release();
  prepared.sub.done = [this, started](absl::Status s) {
    pipeline_.Transferred(started, std::move(s));
  };
  prepared.ticket = OpTicket(started);
  return prepared;
}

absl::Status StoreService::StartOp(Direction direction, const v1::Extent* extent,
                                   const v1::RemoteBuffer* buffer, bool sync, bool crc,
                                   absl::string_view peer, absl::string_view client,
                                   Done done) {
  GDR_ASSIGN_OR_RETURN(PreparedOp p, Prepare(direction, extent, buffer, sync, crc, peer, client,
                                             std::move(done)));
  const absl::Status s = transports_->Submit(p.sub.op, std::move(p.sub.done));
  p.ticket.Submitted(s);
  return s;
}

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

grpc::ServerUnaryReactor* StoreService::UnaryOp(grpc::CallbackServerContext* ctx,
                                                const StreamOpRequest& op,
                                                v1::OpResponse* response) {
  const Direction direction = op.write ? Direction::kStoreToClient : Direction::kClientToStore;
  const v1::Extent* extent = op.extent;
  const v1::RemoteBuffer* buffer = op.buffer;
  const bool sync = op.sync;
  Caller caller;
  if (grpc::ServerUnaryReactor* refused = RefuseUnauthorized(ctx, &caller)) return refused;
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  // The grant stage refuses before validation: a refusal does not tell whether a volume exists.
  if (absl::Status s = pipeline_.Request({caller, direction, extent}); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  const uint64_t length = extent ? extent->length() : 0;
  const bool synced = SyncsToFile(direction, extent, sync);
  const std::string peer = ctx->peer();
  absl::Status s =
      StartOp(direction, extent, buffer, sync, op.crc, peer, ClientIdentity(caller.label(), peer),
              [reactor, response, length, synced](OpAnswer a) {
                if (a.status.ok()) {
                  response->set_bytes(length);
                  response->set_service_ns(a.service_ns);
                  response->set_synced(synced);
                  if (a.crc32c.has_value()) response->set_crc32c(*a.crc32c);
                  if (!a.data.empty()) response->set_data(std::move(a.data));
                }
                reactor->Finish(ToGrpcStatus(a.status));
              });
  if (!s.ok()) {
    // Refused before it started for want of room: the client may send it again (grpc_status.h).
    if (IsNotAdmitted(s)) ctx->AddTrailingMetadata(kNotAdmittedKey, "1");
    reactor->Finish(ToGrpcStatus(s));
  }
  return reactor;
}

namespace {

v1::VolumeInfo InfoOf(const Volume& volume) {
  v1::VolumeInfo vi;
  vi.set_name(volume.name());
  vi.set_size(volume.size());
  vi.set_backing(volume.backing());
  vi.set_read_only(volume.read_only());
  return vi;
}

}  // namespace

absl::Status StoreService::ListVolumes(const Caller& caller, const v1::GetInfoRequest& request,
                                       v1::GetInfoResponse* response) const {
  GDR_RETURN_IF_ERROR(
      CheckVolumePaging(request.volumes_after(), request.volume(), request.no_volumes()));
  if (request.no_volumes()) return absl::OkStatus();
  // Volumes without a grant are not shown, not even as absent.
  if (!request.volume().empty()) {
    std::shared_ptr<const Volume> v = store_->Find(request.volume());
    if (v != nullptr && caller.MaySee(v->name())) *response->add_volumes() = InfoOf(*v);
    return absl::OkStatus();
  }
  // In name order (the store's), from past the cursor: a page of at most PageEntries entries
  // and about kMaxPageBytes, so that no answer grows with the number of volumes.
  const std::vector<std::shared_ptr<const Volume>> volumes = store_->Volumes();
  auto it = std::upper_bound(volumes.begin(), volumes.end(), request.volumes_after(),
                             [](const std::string& after, const std::shared_ptr<const Volume>& v) {
                               return after < v->name();
                             });
  const uint32_t page = PageEntries(request.max_volumes());
  size_t bytes = 0;
  for (; it != volumes.end(); ++it) {
    if (!caller.MaySee((*it)->name())) continue;
    v1::VolumeInfo vi = InfoOf(**it);
    const size_t size = vi.ByteSizeLong();
    const int listed = response->volumes_size();
    if (listed > 0 && (static_cast<uint32_t>(listed) == page || bytes + size > kMaxPageBytes)) {
      response->set_next_volumes_after(response->volumes(listed - 1).name());
      break;
    }
    bytes += size;
    *response->add_volumes() = std::move(vi);
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* StoreService::GetInfo(grpc::CallbackServerContext* ctx,
                                                const v1::GetInfoRequest* request,
                                                v1::GetInfoResponse* response) {
  Caller caller;
  if (grpc::ServerUnaryReactor* refused = RefuseUnauthorized(ctx, &caller)) return refused;
  if (absl::Status s = ListVolumes(caller, *request, response); !s.ok()) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  response->set_version(GDR_VERSION);
  transports_->FillInfo(response);
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

}  // namespace gdr
