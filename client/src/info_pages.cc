// GetInfoPages / GetStatsPages: a daemon (or gdragent) answers the lists that grow with its
// state a page at a time (gdrstore.proto GetInfoRequest, GetStatsRequest); these ask for every
// page in turn and join them, so that no single answer has to pass gRPC's message limit.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/wire/volume_name.h"
#include "client/src/daemon_rpc.h"
#include "gdrstore/client.h"

namespace gdrstore {

namespace {

void SetCallDeadline(grpc::ClientContext* ctx, std::chrono::system_clock::time_point deadline) {
  if (deadline != std::chrono::system_clock::time_point::max()) ctx->set_deadline(deadline);
}

// A later page's failure says where it started, so a caller can tell it from a refused call.
absl::Status PageFailed(const char* rpc, const std::string& after, const grpc::Status& s) {
  absl::Status st = FromGrpcStatus(s);
  if (after.empty()) return st;
  return absl::Status(st.code(), absl::StrCat(rpc, " (the page after '",
                                              gdr::ShownVolumeName(after), "'): ", st.message()));
}

absl::Status CursorStuck(const char* rpc, const std::string& after) {
  return absl::InternalError(absl::StrCat(rpc, ": the answer to the page after '",
                                          gdr::ShownVolumeName(after),
                                          "' names the same page next; stopped reading"));
}

}  // namespace

absl::StatusOr<v1::GetInfoResponse> GetInfoPages(v1::GdrStore::StubInterface& stub,
                                                 v1::GetInfoRequest request,
                                                 std::chrono::system_clock::time_point deadline) {
  const bool paged = request.volume().empty() && !request.no_volumes();
  v1::GetInfoResponse all;
  for (bool first = true;; first = false) {
    grpc::ClientContext ctx;
    SetCallDeadline(&ctx, deadline);
    v1::GetInfoResponse page;
    if (grpc::Status s = stub.GetInfo(&ctx, request, &page); !s.ok()) {
      return PageFailed("GetInfo", first ? std::string() : request.volumes_after(), s);
    }
    std::string next = std::move(*page.mutable_next_volumes_after());
    if (first) {
      all = std::move(page);
    } else {
      for (v1::VolumeInfo& v : *page.mutable_volumes()) *all.add_volumes() = std::move(v);
    }
    if (!paged || next.empty()) break;
    // Names only grow page by page: a cursor that does not would ask for ever.
    if (next <= request.volumes_after()) return CursorStuck("GetInfo", request.volumes_after());
    request.set_volumes_after(std::move(next));
  }
  all.clear_next_volumes_after();
  // A daemon that predates the choice answers every volume.
  if (request.no_volumes()) all.clear_volumes();
  if (!request.volume().empty()) {
    auto* v = all.mutable_volumes();
    v->erase(std::remove_if(v->begin(), v->end(),
                            [&](const v1::VolumeInfo& i) { return i.name() != request.volume(); }),
             v->end());
  }
  return all;
}

absl::StatusOr<v1::GetStatsResponse> GetStatsPages(v1::GdrStore::StubInterface& stub,
                                                   std::chrono::system_clock::time_point deadline) {
  v1::GetStatsRequest request;
  v1::GetStatsResponse all;
  for (bool first = true;; first = false) {
    grpc::ClientContext ctx;
    SetCallDeadline(&ctx, deadline);
    v1::GetStatsResponse page;
    if (grpc::Status s = stub.GetStats(&ctx, request, &page); !s.ok()) {
      return PageFailed("GetStats", first ? std::string() : request.page_after(), s);
    }
    std::string next = std::move(*page.mutable_next_page_after());
    if (first) {
      all = std::move(page);
    } else {
      for (v1::VolumeStats& v : *page.mutable_volumes()) *all.add_volumes() = std::move(v);
      for (v1::FaultStats& f : *page.mutable_faults()) *all.add_faults() = std::move(f);
      if (page.has_agent()) {
        for (v1::AgentSession& c : *page.mutable_agent()->mutable_clients()) {
          *all.mutable_agent()->add_clients() = std::move(c);
        }
      }
    }
    if (next.empty()) break;
    // The cursor is the service's own (a volume name, a session number): it must move on.
    if (next == request.page_after()) return CursorStuck("GetStats", request.page_after());
    request.set_page_after(std::move(next));
  }
  all.clear_next_page_after();
  return all;
}

}  // namespace gdrstore
