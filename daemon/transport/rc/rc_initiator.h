// The rc transport's initiator: one RDMA device port with the store's volumes registered once,
// one completion poller, and the table of client connections made by the Connect RPC. The
// number of RC QPs is bounded per connection and in total; a connection's QPs are destroyed
// when its Connect call ends (client closed it, its process or host died, or it failed to
// answer a QP reset in time), and its ops still in flight fail.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/verbs/completion_poller.h"
#include "common/verbs/memory_region.h"
#include "common/verbs/verbs_device.h"
#include "daemon/transport/initiator.h"
#include "daemon/transport/rc/rc_connection.h"
#include "daemon/transport/rc/rc_options.h"
#include "daemon/store/store.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {

struct RcStats {
  uint32_t qps = 0;
  uint32_t connections = 0;
};

class RcInitiator final : public Initiator {
 public:
  // Opens the device (NOT_FOUND naming what was looked for and what exists), registers every
  // volume of `store` (which must outlive this), starts the poller.
  static absl::StatusOr<std::unique_ptr<RcInitiator>> Create(const RcInitiatorOptions& options,
                                                             const Store& store);
  ~RcInitiator() override;

  // FAILED_PRECONDITION for a connection id that is not open; RESOURCE_EXHAUSTED when the
  // connection's backlog is full; CANCELLED after Shutdown.
  absl::Status Submit(const TransferOp& op, OpDone done) override;
  // Ends every Connect call (CANCELLED), flushes every QP and waits (bounded) for the flushes.
  void Shutdown() override;
  // New Connect calls are refused (UNAVAILABLE); open ones end once they are idle.
  void StartDrain();

  // The reactor of one Connect call. Thread-safe.
  grpc::ServerBidiReactor<gdrstore::v1::ConnectRequest, gdrstore::v1::ConnectResponse>*
  OpenConnection(grpc::CallbackServerContext* ctx);

  void FillInfo(gdrstore::v1::RdmaInfo* info) const;
  RcStats stats() const;
  const verbs::VerbsDevice& device() const { return *device_; }
  // The device's one completion poller and the volumes' lkeys, shared with the dc transport
  // (which runs on the same device). FAILED_PRECONDITION for a volume that is not registered.
  verbs::CompletionPoller* poller() const { return poller_.get(); }
  absl::StatusOr<uint32_t> VolumeLkey(const std::string& volume) const;
  bool Healthy() const { return poller_->Healthy(absl::Seconds(5)); }

 private:
  class ConnectReactor;
  explicit RcInitiator(RcInitiatorOptions options) : options_(std::move(options)) {}
  // Creates the connection for `hello`; RESOURCE_EXHAUSTED when no QP is left.
  absl::StatusOr<std::shared_ptr<RcConnection>> Accept(const gdrstore::v1::RcHello& hello,
                                                       RcControl* control,
                                                       gdrstore::v1::RcAccept* accept);
  // Closes connection `id` with `why`; its QPs are destroyed on the poller thread once flushed.
  void Release(uint64_t id, const absl::Status& why);
  void Housekeeping();

  const RcInitiatorOptions options_;
  // Dependency order: device (context, PD), then the MRs, then the poller (CQ), then the QPs
  // inside the connections; destruction runs the other way.
  std::unique_ptr<verbs::VerbsDevice> device_;
  std::map<std::string, std::unique_ptr<verbs::MemoryRegion>, std::less<>> volume_mrs_;
  std::unique_ptr<verbs::CompletionPoller> poller_;
  uint64_t chunk_bytes_ = 0;
  mutable absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<RcConnection>> connections_ ABSL_GUARDED_BY(mu_);
  uint32_t qps_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> draining_{false};
  std::atomic<uint32_t> open_calls_{0};
  absl::Notification stop_;
  std::thread housekeeper_;
};

}  // namespace gdr
