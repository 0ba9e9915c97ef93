// A health probe both services run behind systemd's watchdog: a real Ping through the server's
// in-process channel must come back, so a wedged gRPC executor stops the watchdog pings.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {

// A probe (HealthMonitor::Probe) that Pings `server` (which serves gdrstore.v1.GdrStore and
// must outlive it) within `deadline`; UNAVAILABLE naming gRPC's error when it does not answer.
// `token`, when given and not empty, is sent as the Bearer credential a daemon with a token
// file asks for.
inline std::function<absl::Status()> InProcessPing(
    grpc::Server* server, absl::Duration deadline,
    std::function<std::string()> token = nullptr) {
  std::shared_ptr<gdrstore::v1::GdrStore::Stub> stub =
      gdrstore::v1::GdrStore::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  return [stub, deadline, token = std::move(token)]() -> absl::Status {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    if (std::string t = token ? token() : std::string(); !t.empty()) {
      ctx.AddMetadata("authorization", "Bearer " + t);
    }
    gdrstore::v1::PingResponse resp;
    grpc::Status s = stub->Ping(&ctx, gdrstore::v1::PingRequest(), &resp);
    if (!s.ok()) {
      return absl::UnavailableError(absl::StrCat("in-process Ping failed: ", s.error_message()));
    }
    return absl::OkStatus();
  };
}

}  // namespace gdr
