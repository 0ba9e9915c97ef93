#include "client/gdrctl/fault_cmd.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/wire/fault_spec.h"

namespace gdrctl {

namespace v1 = gdrstore::v1;

namespace {

std::string Json(const google::protobuf::Message& m) {
  std::string json;
  google::protobuf::util::JsonPrintOptions jo;
  jo.always_print_primitive_fields = true;
  jo.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &json, jo);
  return json;
}

int Refused(const char* rpc, const grpc::Status& s) {
  std::cerr << "gdrctl: fault: " << rpc << ": "
            << absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())) << ": "
            << s.error_message() << "\n";
  return 1;
}

std::string Describe(const v1::FaultState& f) {
  const std::string state = !f.active()             ? std::string("over")
                            : f.remaining_ms() < 0 ? std::string("active, no end")
                                                   : absl::StrCat("active, ", f.remaining_ms(),
                                                                  " ms left");
  return absl::StrCat("fault ", f.id(), "  ", f.text(), "\n    ", state,
                      "; matched ", f.matched(), " ops, hit ", f.hits(),
                      "; seed ", f.seed(), "; from ", f.origin(), "\n");
}

}  // namespace

int FaultSet(v1::Admin::Stub* stub, const std::string& text, bool json, absl::Duration timeout,
             std::ostream& out) {
  absl::StatusOr<v1::FaultSpec> spec = gdr::ParseFaultSpec(text);
  if (!spec.ok()) {
    std::cerr << "gdrctl: fault set: " << spec.status().message() << "\n";
    return 2;
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1::SetFaultRequest req;
  *req.mutable_spec() = *spec;
  v1::SetFaultResponse resp;
  if (grpc::Status s = stub->SetFault(&ctx, req, &resp); !s.ok()) return Refused("SetFault", s);
  out << (json ? Json(resp.fault()) + "\n" : Describe(resp.fault()));
  return 0;
}

int FaultClear(v1::Admin::Stub* stub, const std::vector<uint64_t>& ids, bool all, bool json,
               absl::Duration timeout, std::ostream& out) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1::ClearFaultsRequest req;
  for (uint64_t id : ids) req.add_ids(id);
  req.set_all(all);
  v1::ClearFaultsResponse resp;
  if (grpc::Status s = stub->ClearFaults(&ctx, req, &resp); !s.ok()) {
    return Refused("ClearFaults", s);
  }
  out << (json ? Json(resp) + "\n" : absl::StrCat("cleared ", resp.cleared(), " rule(s)\n"));
  return 0;
}

int FaultList(v1::Admin::Stub* stub, bool json, absl::Duration timeout, std::ostream& out) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  v1::ListFaultsResponse resp;
  if (grpc::Status s = stub->ListFaults(&ctx, v1::ListFaultsRequest(), &resp); !s.ok()) {
    return Refused("ListFaults", s);
  }
  if (json) {
    out << Json(resp) << "\n";
    return 0;
  }
  out << resp.faults_size() << " fault rule(s); daemon fault seed " << resp.seed() << "\n";
  for (const v1::FaultState& f : resp.faults()) out << Describe(f);
  return 0;
}

}  // namespace gdrctl
