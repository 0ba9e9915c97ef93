// StoreService::GetStats: what the op pipeline's stages count (op accounting, faults, media,
// trace) plus live pool and admission figures. Answered inline: it only reads atomics and
// small maps, and lists one page of the volumes.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/wire/list_pages.h"
#include "common/wire/volume_name.h"
#include "daemon/service/store_service.h"

namespace gdr {

namespace v1 = gdrstore::v1;

grpc::ServerUnaryReactor* StoreService::GetStats(grpc::CallbackServerContext* ctx,
                                                 const v1::GetStatsRequest* request,
                                                 v1::GetStatsResponse* response) {
  Caller caller;
  if (grpc::ServerUnaryReactor* refused = RefuseUnauthorized(ctx, &caller)) return refused;
  auto* reactor = ctx->DefaultReactor();
  if (!pipeline_.Has("stats")) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                 "statistics are not collected by this daemon"));
    return reactor;
  }
  // The cursor is a volume name (the last page's last one).
  if (request->page_after().size() > kMaxVolumeName) {
    reactor->Finish(grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("GetStats page_after: ", request->page_after().size(),
                     " bytes, longer than any volume name (", kMaxVolumeName, ")")));
    return reactor;
  }
  (void)FillStats(caller, response,
                  StatsPage{request->page_after(), PageEntries(request->max_entries())});
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

absl::Status StoreService::FillStats(const Caller& caller, v1::GetStatsResponse* response,
                                     const StatsPage& page) const {
  const OpStage* stats = nullptr;
  for (const OpStage* s : pipeline_.stages()) {
    if (absl::string_view(s->name()) == "stats") stats = s;
  }
  if (stats == nullptr) {
    return absl::FailedPreconditionError("statistics are not collected by this daemon");
  }
  response->set_version(GDR_VERSION);
  // The op counters first: the transports' pools and the other stages (faults, media per
  // volume, trace) add to what they lay out.
  stats->FillStats(caller, page, response);
  transports_->FillStats(response);
  for (const OpStage* s : pipeline_.stages()) {
    if (s != stats) s->FillStats(caller, page, response);
  }
  const ServiceLimits limits = this->limits();
  v1::AdmissionStats* a = response->mutable_admission();
  a->set_inflight_ops(limiter_.ops());
  a->set_max_inflight_ops(limits.max_inflight_ops);
  a->set_inflight_bytes(limiter_.bytes());
  a->set_max_inflight_bytes(limits.max_inflight_bytes);
  a->set_open_streams(streams_.load());
  return absl::OkStatus();
}

}  // namespace gdr
