#include "agent/health_check.h"

#include <grpcpp/create_channel_posix.h>
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/status_macros.h"
#include "common/handoff/handoff_client.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr::agent {
namespace {

// One deadline for the whole check: a probe's own timeout must not be outrun by its steps.
absl::StatusOr<std::string> Check(const std::string& socket, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  GDR_ASSIGN_OR_RETURN(std::unique_ptr<handoff::HandoffClient> session,
                       handoff::HandoffClient::Connect(socket, "gdragent health", timeout));
  GDR_ASSIGN_OR_RETURN(ScopedFd fd, session->OpenChannel());
  // The channel owns the descriptor from here.
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateInsecureChannelFromFd("gdragent", fd.Release());
  std::unique_ptr<gdrstore::v1::GdrStore::Stub> stub = gdrstore::v1::GdrStore::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(deadline));
  gdrstore::v1::PingResponse resp;
  grpc::Status s = stub->Ping(&ctx, gdrstore::v1::PingRequest(), &resp);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat("the agent's gRPC server did not answer a Ping: ",
                                               s.error_message()));
  }
  return absl::StrCat(session->server(), " at ", socket, " answers (session ", session->session(),
                      "; its storage daemons were not asked)");
}

}  // namespace

int RunHealthCheck(int argc, char** argv) {
  CLI::App app("gdragent health: whether the agent at SOCKET answers, without asking its "
               "storage daemons (a liveness probe)",
               "gdragent health");
  std::string socket = "/run/gdragent/agent.sock";
  int64_t timeout_ms = 5000;
  app.add_option("--socket", socket, "the agent's socket")->capture_default_str();
  app.add_option("--timeout-ms", timeout_ms, "how long the agent may take to answer")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{600'000}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  absl::StatusOr<std::string> ok = Check(socket, absl::Milliseconds(timeout_ms));
  if (!ok.ok()) {
    std::cerr << "gdragent health: " << socket << ": " << ok.status() << "\n";
    return 1;
  }
  std::cout << *ok << "\n";
  return 0;
}

}  // namespace gdr::agent
