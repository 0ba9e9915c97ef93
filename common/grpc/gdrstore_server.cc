#include "common/grpc/gdrstore_server.h"

#include "common/grpc/grpc_status.h"
#include "common/grpc/refused_bidi.h"

namespace gdr {

namespace v1 = gdrstore::v1;

grpc::ServerUnaryReactor* GdrStoreServer::Write(Context* ctx, const v1::WriteRequest* request,
                                                v1::OpResponse* response) {
  return UnaryOp(ctx, OpOf(*request), response);
}

grpc::ServerUnaryReactor* GdrStoreServer::Read(Context* ctx, const v1::ReadRequest* request,
                                               v1::OpResponse* response) {
  return UnaryOp(ctx, OpOf(*request), response);
}

grpc::ServerUnaryReactor* GdrStoreServer::Ping(Context* ctx, const v1::PingRequest* request,
                                               v1::PingResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(Admit(ctx)));
  return reactor;
}

GdrStoreServer::StreamRpc* GdrStoreServer::Stream(Context* ctx) {
  // Each Stream holds a reactor and its buffers for as long as the client keeps it open.
  absl::StatusOr<std::unique_ptr<StreamHandler>> handler = OpenStream(ctx);
  if (!handler.ok()) {
    return new RefusedBidi<v1::StreamRequest, v1::StreamResponse>(
        ToGrpcStatus(handler.status()));
  }
  return new StreamReactor(*std::move(handler), batch_stream_answers_);
}

}  // namespace gdr
