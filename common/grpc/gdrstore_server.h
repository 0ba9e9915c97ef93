// What every server of gdrstore.v1.GdrStore shares (gdrstored's StoreService, gdragent's
// AgentService): its data calls read into one op shape, Write and Read alike, and each Stream
// call run by the one StreamReactor. A subclass says what an op does and serves the rest.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "common/grpc/stream_reactor.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {

class GdrStoreServer : public gdrstore::v1::GdrStore::CallbackService {
 public:
  using Context = grpc::CallbackServerContext;
  using StreamRpc =
      grpc::ServerBidiReactor<gdrstore::v1::StreamRequest, gdrstore::v1::StreamResponse>;

  grpc::ServerUnaryReactor* Write(Context* ctx, const gdrstore::v1::WriteRequest* request,
                                  gdrstore::v1::OpResponse* response) final;
  grpc::ServerUnaryReactor* Read(Context* ctx, const gdrstore::v1::ReadRequest* request,
                                 gdrstore::v1::OpResponse* response) final;
  StreamRpc* Stream(Context* ctx) final;
  // Answers OK once Admit lets the caller in (a liveness check, the watchdog's included).
  grpc::ServerUnaryReactor* Ping(Context* ctx, const gdrstore::v1::PingRequest* request,
                                 gdrstore::v1::PingResponse* response) final;

 protected:
  // `batch_stream_answers`: the Stream reactors' batch_answers (stream_reactor.h).
  explicit GdrStoreServer(bool batch_stream_answers)
      : batch_stream_answers_(batch_stream_answers) {}

  // One Write or Read call (op.id 0): the reactor it returns finishes when the op ends.
  virtual grpc::ServerUnaryReactor* UnaryOp(Context* ctx, const StreamOpRequest& op,
                                            gdrstore::v1::OpResponse* response) = 0;
  // What one Stream call does with its ops; an error refuses the call with it at once.
  virtual absl::StatusOr<std::unique_ptr<StreamHandler>> OpenStream(Context* ctx) = 0;
  // Whether the caller may call at all (a credential); the error refuses a Ping. Default: yes.
  virtual absl::Status Admit(Context* ctx) { return absl::OkStatus(); }

 private:
  const bool batch_stream_answers_;
};

}  // namespace gdr
