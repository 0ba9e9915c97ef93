#include "common/grpc/grpc_lifetime.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <memory>

namespace gdr {

namespace {

struct Keeper {
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      "unix:/nonexistent/gdrstore-callback-queue", grpc::InsecureChannelCredentials());
  grpc::GenericStub stub{channel};
  grpc::ClientContext ctx;
  grpc::Slice empty{""};
  grpc::ByteBuffer request{&empty, 1};  // gRPC refuses a ByteBuffer that was never filled
  grpc::ByteBuffer response;
};

}  // namespace

void KeepGrpcCallbackQueue() {
  // Never freed (and reachable from here until exit): the channel must outlive every other one.
  // The call goes nowhere (a path that cannot exist) and fails at once; making it is what takes
  // the queue.
  static Keeper* const keeper = [] {
    auto* k = new Keeper();
    k->stub.UnaryCall(&k->ctx, "/gdr.Keepalive/Hold", grpc::StubOptions(), &k->request,
                      &k->response, [](grpc::Status) {});
    return k;
  }();
  (void)keeper;
}

}  // namespace gdr
