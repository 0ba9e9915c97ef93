#include "bench/bare_grpc.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "bench/chained_calls.h"
#include "common/grpc/grpc_status.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdrbench {

namespace v1 = gdrstore::v1;

struct BareGrpcServer::Service : v1::GdrStore::CallbackService {
  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* ctx, const v1::PingRequest*,
                                 v1::PingResponse*) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

BareGrpcServer::BareGrpcServer() : service_(std::make_unique<Service>()) {}

BareGrpcServer::~BareGrpcServer() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

absl::StatusOr<std::unique_ptr<BareGrpcServer>> BareGrpcServer::Start() {
  std::unique_ptr<BareGrpcServer> s(new BareGrpcServer());
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(s->service_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || port == 0) {
    return absl::UnavailableError("the bare gRPC server did not start on 127.0.0.1");
  }
  s->address_ = absl::StrCat("127.0.0.1:", port);
  return s;
}

absl::StatusOr<std::vector<uint64_t>> BarePingLoop(const std::string& address, uint64_t ops) {
  std::unique_ptr<v1::GdrStore::Stub> stub =
      v1::GdrStore::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  struct Call {
    grpc::ClientContext ctx;
    v1::PingRequest request;
    v1::PingResponse response;
  };
  absl::StatusOr<std::vector<uint64_t>> latency_ns =
      ChainedCalls(ops, [&](std::function<void(absl::Status)> done) {
        auto call = std::make_shared<Call>();
        call->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        stub->async()->Ping(&call->ctx, &call->request, &call->response,
                            [call, done = std::move(done)](grpc::Status st) {
                              done(gdr::FromGrpcStatus(st));
                            });
      });
  if (!latency_ns.ok()) {
    return absl::Status(latency_ns.status().code(),
                        absl::StrCat("bare gRPC Ping to ", address, ": ",
                                     latency_ns.status().message()));
  }
  return latency_ns;
}

}  // namespace gdrbench
