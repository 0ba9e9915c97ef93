// The gdrstore.v1.GdrStore gRPC service on the callback API. A handler validates the request,
// starts it through the op pipeline (admission and the daemon's other stages, op_pipeline.h),
// hands the op to the initiator and returns; the transport thread that sees the last chunk
// complete ends it through the pipeline, which answers the RPC. No reaction blocks.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/gdrstore_server.h"
#include "daemon/service/inflight_limiter.h"
#include "daemon/service/op_pipeline.h"
#include "daemon/service/op_stages.h"
#include "daemon/service/token_auth.h"
#include "daemon/store/store.h"
#include "daemon/transport/connect_handler.h"
#include "daemon/transport/transfer_op.h"
#include "daemon/transport/transport_set.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {

struct ServiceLimits {
  uint64_t max_op_bytes = 256ull << 20;
  uint32_t max_inflight_per_stream = 256;
  uint32_t max_inflight_ops = 4096;
  uint64_t max_inflight_bytes = 4ull << 30;
  uint64_t chunk_bytes = 1 << 20;
  uint32_t max_links = 64;
};

// An op Prepare started: the submission for the initiator, and the ticket that refuses the op
// if the initiator does not take it.
struct PreparedOp {
  Submission sub;
  OpTicket ticket;
};

// Write, Read and Stream calls come in through GdrStoreServer as UnaryOp and OpenStream.
class StoreService final : public GdrStoreServer {
 public:
  // `store` and `transports` must outlive the service and every RPC it started; requests
  // naming a transport the set does not run answer UNIMPLEMENTED. Ops pass the service's own
  // stages alone (stages()) until SetPipeline.
  StoreService(const Store* store, TransportSet* transports, ServiceLimits limits);

  // The stages every op passes, in order (op_stages.h lists the daemon's); stages() must be
  // among them (without them it stops the process: a mistake in the code). Set once, before
  // serving; each must outlive the service and every RPC.
  void SetPipeline(std::vector<OpStage*> stages);
  // The service's own stages: the callers' grants, the CRC answer and its admission limits
  // (InflightLimiter).
  std::vector<OpStage*> stages() { return {&grants_, &crc_, &admission_}; }

  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* ctx,
                                    const gdrstore::v1::GetInfoRequest* request,
                                    gdrstore::v1::GetInfoResponse* response) override;
  grpc::ServerBidiReactor<gdrstore::v1::ConnectRequest, gdrstore::v1::ConnectResponse>* Connect(
      grpc::CallbackServerContext* ctx) override;

  // The transport that serves Connect calls; null (the default) answers them UNIMPLEMENTED.
  // Set before the server starts; must outlive the service.
  void set_connect_handler(ConnectHandler* handler) { connect_ = handler; }

  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* ctx,
                                     const gdrstore::v1::GetStatsRequest* request,
                                     gdrstore::v1::GetStatsResponse* response) override;
  // What GetStats answers `caller` (a default Caller: everything, as the metrics exporter
  // reads it), the per-volume figures of `page` (default: every volume). FAILED_PRECONDITION
  // when the daemon collects no statistics (no stats stage). Thread-safe.
  absl::Status FillStats(const Caller& caller, gdrstore::v1::GetStatsResponse* response,
                         const StatsPage& page = {}) const;

  // From now on new ops are refused with UNAVAILABLE; ops already started run to completion.
  void StartDrain() { draining_.store(true); }
  uint32_t inflight_ops() const { return limiter_.ops(); }
  uint32_t open_streams() const { return streams_.load(); }
  uint64_t inflight_bytes() const { return limiter_.bytes(); }

  // SIGHUP: new admission limits (max_op_bytes, max_inflight_*) take effect for ops started
  // from now on; chunk_bytes and max_links are fixed at start. Thread-safe.
  void UpdateLimits(const ServiceLimits& limits);
  // The credentials callers must present and their grants (daemon/service/token_auth.h);
  // empty: none needed, every volume open. Logs a warning for each grant naming a volume this
  // daemon does not have. Thread-safe, live (SIGHUP).
  void SetTokens(std::vector<Credential> credentials);
  // Set (before SetTokens) when the server verifies client certificates against a CA (mTLS):
  // only then do san: lines of the token file match a certificate. Thread-safe.
  void TrustClientCertificates(bool verified) { auth_.set_client_certificates_verified(verified); }
  // An accepted token for the daemon's own calls to itself (no volume right).
  std::string InternalToken() const { return auth_.InternalToken(); }
  // Where GetInfo.tls comes from (the TLS reloader, which outlives the server); set before
  // serving. Unset: GetInfo reports TLS off.
  void set_tls_info(std::function<gdrstore::v1::TlsInfo()> source) {
    tls_info_ = std::move(source);
  }
  ServiceLimits limits() const;

  // The volumes a GetInfo answer lists for `caller` (gdrstore.proto GetInfoRequest): one page,
  // one volume or none. INVALID_ARGUMENT naming the field of a request it cannot answer.
  absl::Status ListVolumes(const Caller& caller, const gdrstore::v1::GetInfoRequest& request,
                           gdrstore::v1::GetInfoResponse* response) const;

  // Validates and starts one op; `done` gets the final status and the daemon-side service time.
  // A non-OK return means nothing started and `done` will not run. `peer` is the call's
  // address (ServerContext::peer()): the tcp transport connects only where it lets it.
  // `sync`: a Read into a file-backed volume is answered only after msync of the extent.
  // `crc`: the answer carries the CRC32C of the extent's store bytes (OpAnswer::crc32c).
  // `client`: the identity the op is counted under per client (ClientIdentity), and that
  // fault rules match. The caller's grants are checked before (OpPipeline::Request).
  using Done = OpContext::Done;
  absl::Status StartOp(Direction direction, const gdrstore::v1::Extent* extent,
                       const gdrstore::v1::RemoteBuffer* buffer, bool sync, bool crc,
                       absl::string_view peer, absl::string_view client, Done done);
  // The first half of StartOp: validates the request and runs the pipeline's start (admission
  // included). The returned submission, handed to the initiator, starts the op; tell the
  // ticket the initiator's answer (OpTicket::Submitted): a refused or dropped one is refused,
  // and `done` never runs. A non-OK return has been refused (and counted) already.
  absl::StatusOr<PreparedOp> Prepare(Direction direction, const gdrstore::v1::Extent* extent,
                                     const gdrstore::v1::RemoteBuffer* buffer, bool sync,
                                     bool crc, absl::string_view peer, absl::string_view client,
                                     Done done);
  // The caller of a call (UNAUTHENTICATED / PERMISSION_DENIED as for the data RPCs); for the
  // Admin service, which shares this service's credentials.
  absl::StatusOr<Caller> Identify(const grpc::CallbackServerContext& ctx) const {
    return auth_.Check(ctx);
  }
  // Whether an op so described will be answered only after msync: a Read (client -> store)
  // with sync into a file-backed volume.
  bool SyncsToFile(Direction direction, const gdrstore::v1::Extent* extent, bool sync) const {
    return sync && extent != nullptr && syncs_ &&
           SyncStage::VolumeToSync(store_->Find(extent->volume()).get(), direction, sync) !=
               nullptr;
  }
  // Accounts (in the totals) a Stream op refused before Prepare (per-stream limit, bad op).
  void CountUnstarted(absl::StatusCode code) { pipeline_.RefuseUnstarted(code); }

 private:
  class StreamCall;  // the reactor of one Stream call (stream_call.cc)
  // nullptr when the call may proceed (its caller in *caller when given); otherwise a reactor
  // already finished with the refusal.
  grpc::ServerUnaryReactor* RefuseUnauthorized(grpc::CallbackServerContext* ctx,
                                               Caller* caller = nullptr);
  grpc::ServerUnaryReactor* UnaryOp(grpc::CallbackServerContext* ctx, const StreamOpRequest& op,
                                    gdrstore::v1::OpResponse* response) override;
  // Ping's caller check: UNAUTHENTICATED / PERMISSION_DENIED as for the data RPCs.
  absl::Status Admit(grpc::CallbackServerContext* ctx) override {
    return auth_.Check(*ctx).status();
  }
  // The caller's handler (stream_call.cc); UNAUTHENTICATED / PERMISSION_DENIED refuse the call.
  absl::StatusOr<std::unique_ptr<StreamHandler>> OpenStream(
      grpc::CallbackServerContext* ctx) override;
  uint32_t max_inflight_per_stream() const {
    return max_inflight_per_stream_.load(std::memory_order_relaxed);
  }

  const Store* store_;
  TransportSet* transports_;
  std::function<gdrstore::v1::TlsInfo()> tls_info_;
  mutable absl::Mutex limits_mu_;
  ServiceLimits limits_ ABSL_GUARDED_BY(limits_mu_);
  std::atomic<uint64_t> max_op_bytes_;
  std::atomic<uint32_t> max_inflight_per_stream_;
  InflightLimiter limiter_;
  GrantStage grants_;
  CrcStage crc_;
  AdmissionStage admission_{&limiter_};
  OpPipeline pipeline_{{&grants_, &crc_, &admission_}};
  bool syncs_ = false;  // the pipeline has an msync stage
  TokenAuth auth_;
  std::atomic<bool> draining_{false};
  std::atomic<uint32_t> streams_{0};
  ConnectHandler* connect_ = nullptr;
};

}  // namespace gdr
