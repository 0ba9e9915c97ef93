// The gdrstore.v1.GdrStore gRPC service on the callback API. A handler validates the request,
// takes an admission permit, hands the op to the initiator and returns; the transport thread
// that sees the last chunk complete finishes the RPC. No reaction blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "daemon/inflight_limiter.h"
#include "daemon/initiator.h"
#include "daemon/store.h"
#include "daemon/transfer_op.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {

class RcInitiator;

struct ServiceLimits {
  uint64_t max_op_bytes = 256ull << 20;
  uint32_t max_inflight_per_stream = 256;
  uint32_t max_inflight_ops = 4096;
  uint64_t max_inflight_bytes = 4ull << 30;
  uint64_t chunk_bytes = 1 << 20;
  uint32_t max_links = 64;
};

class StoreService final : public gdrstore::v1::GdrStore::CallbackService {
 public:
  // `store` and `initiator` must outlive the service and every RPC it started.
  StoreService(const Store* store, Initiator* initiator, ServiceLimits limits,
               OfferedTransports offered);

  grpc::ServerUnaryReactor* Write(grpc::CallbackServerContext* ctx,
                                  const gdrstore::v1::WriteRequest* request,
                                  gdrstore::v1::OpResponse* response) override;
  grpc::ServerUnaryReactor* Read(grpc::CallbackServerContext* ctx,
                                 const gdrstore::v1::ReadRequest* request,
                                 gdrstore::v1::OpResponse* response) override;
  grpc::ServerBidiReactor<gdrstore::v1::StreamRequest, gdrstore::v1::StreamResponse>* Stream(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* ctx,
                                    const gdrstore::v1::GetInfoRequest* request,
                                    gdrstore::v1::GetInfoResponse* response) override;
  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* ctx,
                                 const gdrstore::v1::PingRequest* request,
                                 gdrstore::v1::PingResponse* response) override;
  grpc::ServerBidiReactor<gdrstore::v1::ConnectRequest, gdrstore::v1::ConnectResponse>* Connect(
      grpc::CallbackServerContext* ctx) override;

  // The rc transport serving Connect and the RDMA part of GetInfo; null (the default) answers
  // Connect with UNIMPLEMENTED. Set before the server starts; must outlive the service.
  void set_rc(RcInitiator* rc) { rc_ = rc; }
  // Why rc is not offered, for GetInfo (e.g. the device error at start).
  void set_rc_detail(std::string detail) { rc_detail_ = std::move(detail); }
  // GetInfo's dc line: what runs (DCIs, device), or why dc is not offered.
  void set_dc_detail(std::string detail) { dc_detail_ = std::move(detail); }

  // From now on new ops are refused with UNAVAILABLE; ops already started run to completion.
  void StartDrain() { draining_.store(true); }
  uint32_t inflight_ops() const { return limiter_.ops(); }
  uint32_t open_streams() const { return streams_.load(); }

  // Validates and starts one op; `done` gets the final status and the daemon-side service time.
  // A non-OK return means nothing started and `done` will not run.
  using Done = std::function<void(absl::Status, uint64_t service_ns)>;
  absl::Status StartOp(Direction direction, const gdrstore::v1::Extent* extent,
                       const gdrstore::v1::RemoteBuffer* buffer, Done done);
  // The first half of StartOp: validates the request and takes its admission permit. The
  // returned submission, handed to the initiator, starts the op; dropped unstarted, it gives
  // the permit back and `done` never runs.
  absl::StatusOr<Submission> Prepare(Direction direction, const gdrstore::v1::Extent* extent,
                                     const gdrstore::v1::RemoteBuffer* buffer, Done done);

 private:
  class OpStream;
  grpc::ServerUnaryReactor* UnaryOp(grpc::CallbackServerContext* ctx, Direction direction,
                                    const gdrstore::v1::Extent* extent,
                                    const gdrstore::v1::RemoteBuffer* buffer,
                                    gdrstore::v1::OpResponse* response);

  const Store* store_;
  Initiator* initiator_;
  const ServiceLimits limits_;
  const OfferedTransports offered_;
  InflightLimiter limiter_;
  std::atomic<bool> draining_{false};
  std::atomic<uint32_t> streams_{0};
  RcInitiator* rc_ = nullptr;
  std::string rc_detail_ = "no RDMA device configured";
  std::string dc_detail_ = "no mlx5 DC-capable device configured";
};

// absl::Status -> grpc::Status with the same code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace gdr
