#include "agent/agent_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/grpc/grpc_status.h"
#include "common/grpc/refused_bidi.h"
#include "common/wire/list_pages.h"
#include "common/wire/op_request_checks.h"
#include "common/wire/transport_kind.h"
#include "common/wire/volume_name.h"

namespace gdr::agent {

namespace v1 = gdrstore::v1;

namespace {

// The transport an endpoint names, spelled as everywhere else (transport_kind.h).
const char* EndpointName(v1::RemoteBuffer::EndpointCase c) {
  const std::optional<TransportKind> kind = TransportOfEndpoint(c);
  return kind ? TransportName(*kind) : "no endpoint";
}

// What every op shares, checked before its memory is looked up: the store-free checks the
// daemon runs too (common/wire/op_request_checks.h), then the one transport the agent serves.
absl::Status CheckRequest(const v1::Extent* extent, const v1::RemoteBuffer* buffer) {
  GDR_RETURN_IF_ERROR(CheckOpExtent(extent, buffer));
  GDR_RETURN_IF_ERROR(CheckOpBuffer(*extent, *buffer));
  if (buffer->endpoint_case() != v1::RemoteBuffer::kLocal) {
    return absl::UnimplementedError(absl::StrCat(
        "this agent serves the local transport only (a LocalEndpoint with the session and key "
        "its socket gave), and the request names ",
        EndpointName(buffer->endpoint_case())));
  }
  return absl::OkStatus();
}

// The upstream deadline of a call: its own, or none (the upstream default applies).
std::chrono::system_clock::time_point DeadlineOf(const grpc::CallbackServerContext& ctx) {
  return ctx.deadline();
}

}  // namespace

absl::Status AgentError(const absl::Status& status) { return Prefixed("gdragent: ", status); }

AgentService::AgentService(Upstreams* upstream, ClientTable* sessions,
                           AgentServiceOptions options)
    : GdrStoreServer(/*batch_stream_answers=*/false),
      upstream_(upstream),
      sessions_(sessions),
      options_(std::move(options)),
      started_(absl::Now()) {}

void AgentService::AddChannel(int fd, const handoff::SessionInfo& session) {
  absl::MutexLock lock(&channels_mu_);
  channels_[fd] = ChannelOwner{session.peer.uid, session.id};
}

std::optional<AgentService::ChannelOwner> AgentService::Caller(
    const grpc::CallbackServerContext& ctx) const {
  const std::string peer = ctx.peer();
  int fd = -1;
  if (!absl::StartsWith(peer, "fd:") || !absl::SimpleAtoi(peer.substr(3), &fd)) {
    return std::nullopt;
  }
  absl::MutexLock lock(&channels_mu_);
  auto it = channels_.find(fd);
  if (it == channels_.end()) return std::nullopt;
  return it->second;
}

std::optional<uid_t> AgentService::CallerUid(const grpc::CallbackServerContext& ctx) const {
  const std::optional<ChannelOwner> owner = Caller(ctx);
  if (!owner) return std::nullopt;
  return owner->uid;
}

absl::Status AgentService::BeginStream(uint64_t session) {
  if (session == 0) return absl::OkStatus();
  absl::MutexLock lock(&channels_mu_);
  uint32_t& open = session_streams_[session];
  if (open >= options_.max_streams_per_client) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the client has ", open, " Stream calls open, its limit (--max-streams-per-client=",
        options_.max_streams_per_client, "); end one first"));
  }
  ++open;
  return absl::OkStatus();
}

void AgentService::EndStream(uint64_t session) {
  if (session == 0) return;
  absl::MutexLock lock(&channels_mu_);
  auto it = session_streams_.find(session);
  if (it != session_streams_.end() && --it->second == 0) session_streams_.erase(it);
}

void AgentService::StartOp(bool write, const v1::Extent* extent, const v1::RemoteBuffer* buffer,
                           bool sync, bool crc, std::chrono::system_clock::time_point deadline,
                           uint32_t lane, OpDone done) {
  auto refuse = [this, &done](const absl::Status& s) {
    sessions_->CountRefused(s.code());
    done(AgentError(s));
  };
  if (draining_.load(std::memory_order_relaxed)) {
    refuse(absl::UnavailableError("the agent is shutting down; no new ops are accepted"));
    return;
  }
  if (absl::Status s = CheckRequest(extent, buffer); !s.ok()) {
    refuse(s);
    return;
  }
  const handoff::HandoffServer* handoff = handoff_.load();
  if (handoff == nullptr) {
    refuse(absl::UnavailableError("the agent is starting"));
    return;
  }
  const v1::LocalEndpoint& local = buffer->local();
  // A get writes into the client's memory: its region must have been handed over writable.
  absl::StatusOr<std::shared_ptr<const handoff::ImportedRegion>> region =
      handoff->Resolve(local.session(), local.key(), buffer->rkey(), buffer->address(),
                       buffer->length(), write);
  if (!region.ok()) {
    refuse(region.status());
    return;
  }
  absl::StatusOr<AdmittedOp> admitted =
      sessions_->Begin(local.session(), *region, write, extent->length());
  if (!admitted.ok()) {
    done(AgentError(admitted.status()));  // counted by the table
    return;
  }
  ForwardedOp op;
  op.kind = write ? gdrstore::OpKind::kWrite
                  : (sync ? gdrstore::OpKind::kReadSync : gdrstore::OpKind::kRead);
  op.extent = gdrstore::Extent{extent->volume(), extent->offset(), extent->length()};
  op.memory = admitted->mapped->memory.get();
  op.offset = buffer->address() - (*region)->address();
  op.crc32c = crc;
  op.deadline = deadline;
  region->reset();  // the op holds the region through `admitted` (ClientTable::Sweep)
  upstream_->Submit(op, lane,
                    [this, admitted = *std::move(admitted),
                     done = std::move(done)](absl::StatusOr<gdrstore::OpResult> r) mutable {
                      sessions_->Finish(admitted, r.status());
                      // The registration may go (and the memory be unmapped) as the last
                      // reference drops, before the answer leaves.
                      admitted = AdmittedOp{};
                      if (!r.ok()) r = AgentError(r.status());
                      done(std::move(r));
                    });
}

grpc::ServerUnaryReactor* AgentService::UnaryOp(grpc::CallbackServerContext* ctx,
                                                const StreamOpRequest& op,
                                                v1::OpResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  StartOp(op.write, op.extent, op.buffer, op.sync, op.crc, DeadlineOf(*ctx), upstream_->PickLane(),
          [ctx, reactor, response](absl::StatusOr<gdrstore::OpResult> r) {
            if (r.ok()) {
              response->set_bytes(r->bytes);
              response->set_service_ns(r->service_ns);
              response->set_synced(r->synced);
              if (r->crc32c) response->set_crc32c(*r->crc32c);
              response->set_path(std::move(r->path));  // the client puts its hop before it
              reactor->Finish(grpc::Status::OK);
              return;
            }
            // Refused for want of room: the client may send it again (grpc_status.h).
            if (IsNotAdmitted(r.status())) ctx->AddTrailingMetadata(kNotAdmittedKey, "1");
            reactor->Finish(ToGrpcStatus(r.status()));
          });
  return reactor;
}

grpc::ServerUnaryReactor* AgentService::GetInfo(grpc::CallbackServerContext* ctx,
                                                const v1::GetInfoRequest* request,
                                                v1::GetInfoResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status s = CheckVolumePaging(request->volumes_after(), request->volume(),
                                         request->no_volumes());
      !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  const auto deadline =
      std::min(ctx->deadline(), std::chrono::system_clock::now() + std::chrono::seconds(10));
  // The page the caller asked for, gathered from the daemons' pages (or the cluster's list).
  upstream_->GetInfo(*request, deadline, [this, reactor, response](absl::StatusOr<UpstreamInfo> r) {
    if (!r.ok()) {
      reactor->Finish(ToGrpcStatus(AgentError(r.status())));
      return;
    }
    response->set_version(GDR_VERSION);
    v1::TransportInfo* t = response->add_transports();
    t->set_transport(v1::TRANSPORT_LOCAL);
    t->set_available(true);
    // Which path the agent reaches each daemon by: the caller's memory goes no other way.
    t->set_detail(absl::StrCat("through gdragent ", GDR_VERSION, ": ", r->paths));
    *response->mutable_volumes() = std::move(*r->info.mutable_volumes());
    response->set_next_volumes_after(r->info.next_volumes_after());
    // The daemons' limits, but ops in flight as this agent admits one client's.
    v1::Limits* l = response->mutable_limits();
    *l = r->info.limits();
    const uint32_t per_client = sessions_->max_ops_per_session();
    l->set_max_inflight_ops(std::min(per_client, l->max_inflight_ops() ? l->max_inflight_ops()
                                                                       : per_client));
    l->set_max_inflight_per_stream(l->max_inflight_ops());
    v1::LocalInfo* local = response->mutable_local();
    local->set_socket_path(options_.socket_path);
    local->set_host_id(options_.host_id);
    response->mutable_tls()->set_enabled(false);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* AgentService::GetStats(grpc::CallbackServerContext* ctx,
                                                 const v1::GetStatsRequest* request,
                                                 v1::GetStatsResponse* response) {
  // The page cursor is a session number (the last page's last), in decimal.
  uint64_t after = 0;
  if (!request->page_after().empty() &&
      (request->page_after().size() > 20 ||
       request->page_after().find_first_not_of("0123456789") != std::string::npos ||
       !absl::SimpleAtoi(request->page_after(), &after))) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("GetStats page_after '", ShownVolumeName(request->page_after()),
                     "' is not a session number (decimal), as gdragent's pages end with")));
    return reactor;
  }
  const std::optional<uid_t> caller = CallerUid(*ctx);
  const bool see_all = caller && (*caller == 0 || *caller == options_.agent_uid);
  response->set_version(GDR_VERSION);
  response->set_uptime_ns(static_cast<uint64_t>(absl::ToInt64Nanoseconds(absl::Now() - started_)));
  v1::AgentStats* agent = response->mutable_agent();
  sessions_->Fill(response, agent, caller, see_all, after, PageEntries(request->max_entries()));
  if (const handoff::HandoffServer* h = handoff_.load()) {
    const handoff::HandoffStats hs = h->stats();
    agent->set_sessions(static_cast<uint32_t>(hs.sessions));
    agent->set_regions(hs.regions);
    agent->set_registered_bytes(hs.bytes);
    agent->set_sessions_total(hs.sessions_total);
    agent->set_refused(hs.refused);
  }
  agent->set_upstream(upstream_->Path());
  agent->set_upstream_registrations(upstream_->live_registrations());
  v1::AdmissionStats* a = response->mutable_admission();
  a->set_inflight_ops(static_cast<uint32_t>(std::max<int64_t>(0, sessions_->inflight())));
  a->set_open_streams(streams_.load());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerBidiReactor<v1::ConnectRequest, v1::ConnectResponse>* AgentService::Connect(
    grpc::CallbackServerContext* ctx) {
  return new RefusedBidi<v1::ConnectRequest, v1::ConnectResponse>(grpc::Status(
      grpc::StatusCode::UNIMPLEMENTED,
      "gdragent: the agent offers the local transport only; its own connection to the daemon "
      "is its business (GetInfo says which)"));
}

}  // namespace gdr::agent
