#include "daemon/service/admin_service.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_status.h"
#include "common/base/log.h"

namespace gdr {

namespace v1 = gdrstore::v1;

namespace {

// More ids in one ClearFaults request are refused: a bound on what a caller makes us hold.
constexpr int kMaxClearIds = 4096;

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* ctx, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

}  // namespace

absl::StatusOr<std::string> AdminService::Authorize(grpc::CallbackServerContext* ctx) const {
  absl::StatusOr<Caller> caller = store_->Identify(*ctx);
  if (!caller.ok()) return caller.status();
  if (absl::Status s = caller->AllowsAdmin(); !s.ok()) {
    GDR_LOG_EVERY_N_SEC(kWarning, 10) << "Admin call refused: " << s;
    return s;
  }
  std::string label(caller->label());
  return label.empty() ? std::string("anyone (no token file)") : label;
}

grpc::ServerUnaryReactor* AdminService::SetFault(grpc::CallbackServerContext* ctx,
                                                 const v1::SetFaultRequest* request,
                                                 v1::SetFaultResponse* response) {
  absl::StatusOr<std::string> who = Authorize(ctx);
  if (!who.ok()) return Answer(ctx, who.status());
  absl::StatusOr<v1::FaultState> state =
      faults_->Add(request->spec(), absl::StrCat("admin ", *who));
  if (state.ok()) *response->mutable_fault() = *std::move(state);
  return Answer(ctx, state.status());
}

grpc::ServerUnaryReactor* AdminService::ClearFaults(grpc::CallbackServerContext* ctx,
                                                    const v1::ClearFaultsRequest* request,
                                                    v1::ClearFaultsResponse* response) {
  absl::StatusOr<std::string> who = Authorize(ctx);
  if (!who.ok()) return Answer(ctx, who.status());
  if (request->ids_size() > kMaxClearIds) {
    return Answer(ctx, absl::InvalidArgumentError(
                           absl::StrCat("ids: more than ", kMaxClearIds, " in one request")));
  }
  if (request->ids_size() == 0 && !request->all()) {
    return Answer(ctx, absl::InvalidArgumentError("name rule ids, or set all"));
  }
  std::vector<uint64_t> ids(request->ids().begin(), request->ids().end());
  absl::StatusOr<uint64_t> cleared = faults_->Clear(ids, request->all());
  if (cleared.ok()) response->set_cleared(*cleared);
  return Answer(ctx, cleared.status());
}

grpc::ServerUnaryReactor* AdminService::ListFaults(grpc::CallbackServerContext* ctx,
                                                   const v1::ListFaultsRequest* request,
                                                   v1::ListFaultsResponse* response) {
  absl::StatusOr<std::string> who = Authorize(ctx);
  if (!who.ok()) return Answer(ctx, who.status());
  *response = faults_->List();
  return Answer(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* AdminService::CreateVolume(grpc::CallbackServerContext* ctx,
                                                     const v1::CreateVolumeRequest* request,
                                                     v1::CreateVolumeResponse* response) {
  absl::StatusOr<std::string> who = Authorize(ctx);
  if (!who.ok()) return Answer(ctx, who.status());
  // The fields first, here: a bad request is answered without queueing behind a fill.
  if (absl::StatusOr<VolumeSpec> spec = volumes_->SpecOf(*request); !spec.ok()) {
    return Answer(ctx, spec.status());
  }
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  volumes_->Create(*request, absl::StrCat("admin ", *who),
                   [reactor, response](absl::StatusOr<VolumeCatalog::Made> made) {
                     if (made.ok()) {
                       const Volume& v = *made->volume;
                       v1::VolumeInfo* info = response->mutable_volume();
                       info->set_name(v.name());
                       info->set_size(v.size());
                       info->set_backing(v.backing());
                       info->set_read_only(v.read_only());
                       response->set_created(made->created);
                     }
                     reactor->Finish(ToGrpcStatus(made.status()));
                   });
  return reactor;
}

grpc::ServerUnaryReactor* AdminService::DeleteVolume(grpc::CallbackServerContext* ctx,
                                                     const v1::DeleteVolumeRequest* request,
                                                     v1::DeleteVolumeResponse* response) {
  absl::StatusOr<std::string> who = Authorize(ctx);
  if (!who.ok()) return Answer(ctx, who.status());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  volumes_->Delete(*request, absl::StrCat("admin ", *who),
                   [reactor](absl::Status s) { reactor->Finish(ToGrpcStatus(s)); });
  return reactor;
}

}  // namespace gdr
