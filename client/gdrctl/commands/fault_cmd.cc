// `gdrctl fault set SPEC | clear ID...|--all | list`: the daemon's injected faults, through its
// gdrstore.v1.Admin service (an admin=yes token when it has a token file). SPEC is the text of
// common/wire/fault_spec.h. Exit 2 for a spec that does not parse, 1 when the daemon refuses.
#include <grpcpp/grpcpp.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/gdrctl/command.h"
#include "client/gdrctl/message_json.h"
#include "client/src/daemon_rpc.h"
#include "common/wire/fault_spec.h"
#include "gdrstore/v1/admin.grpc.pb.h"

namespace gdrctl {

namespace v1 = gdrstore::v1;

namespace {

int Refused(const char* rpc, const grpc::Status& s) {
  return Fail(gdrstore::FromGrpcStatus(s), std::string("fault: ") + rpc);
}

std::string Describe(const v1::FaultState& f) {
  const std::string state = !f.active() ? std::string("over")
                            : f.remaining_ms() < 0
                                ? std::string("active, no end")
                                : absl::StrCat("active, ", f.remaining_ms(), " ms left");
  return absl::StrCat("fault ", f.id(), "  ", f.text(), "\n    ", state, "; matched ", f.matched(),
                      " ops, hit ", f.hits(), "; seed ", f.seed(), "; from ", f.origin(), "\n");
}

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
  out << (json ? MessageJson(resp.fault()) + "\n" : Describe(resp.fault()));
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
  out << (json ? MessageJson(resp) + "\n" : absl::StrCat("cleared ", resp.cleared(), " rule(s)\n"));
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
    out << MessageJson(resp) << "\n";
    return 0;
  }
  out << resp.faults_size() << " fault rule(s); daemon fault seed " << resp.seed() << "\n";
  for (const v1::FaultState& f : resp.faults()) out << Describe(f);
  return 0;
}

class FaultCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* fault = app.add_subcommand(
        "fault",
        "injected faults of the daemon (its Admin service; an admin=yes token when it "
        "has a token file)");
    fault->require_subcommand(1);
    set_ = fault->add_subcommand(
        "set",
        "add a rule: kind=error|stall|corrupt|drop-link|qp-error|rail-down and its "
        "fields (docs/simulation.md)");
    set_->add_option("spec", spec_, "e.g. kind=error,volume=vol0,rate=0.1,code=UNAVAILABLE")
        ->required();
    clear_ = fault->add_subcommand("clear", "remove rules by id, or --all");
    clear_->add_option("ids", ids_, "rule ids (gdrctl fault list)");
    clear_->add_flag("--all", all_, "remove every rule");
    fault->add_subcommand("list", "rules, their counts and windows");
    return fault;
  }

  int Run(const Context& ctx) override {
    if (clear_->parsed() && ids_.empty() == !all_) {
      return Fail(kExitUsage, "fault clear: name rule ids or give --all (not both)");
    }
    absl::StatusOr<gdrstore::ClientOptions> o = ctx.target.ClientOptions();
    if (!o.ok()) return Fail(o.status(), "fault");
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = gdrstore::OpenDaemonChannel(*o);
    if (!channel.ok()) return Fail(channel.status(), "fault");
    auto admin = v1::Admin::NewStub(*channel);
    const absl::Duration timeout = absl::Milliseconds(ctx.global.timeout_ms);
    const bool json = ctx.global.json;
    if (set_->parsed()) return FaultSet(admin.get(), spec_, json, timeout, std::cout);
    if (clear_->parsed()) return FaultClear(admin.get(), ids_, all_, json, timeout, std::cout);
    return FaultList(admin.get(), json, timeout, std::cout);
  }

 private:
  CLI::App* set_ = nullptr;
  CLI::App* clear_ = nullptr;
  std::string spec_;
  std::vector<uint64_t> ids_;
  bool all_ = false;
};

}  // namespace

std::unique_ptr<Command> NewFaultCommand() { return std::make_unique<FaultCommand>(); }

}  // namespace gdrctl
