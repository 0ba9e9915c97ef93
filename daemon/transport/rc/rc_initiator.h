// The rc transport's initiator: the table of client connections on the shared verbs core (one
// device port, the store's volumes registered once, one completion poller). The number of RC
// QPs is bounded per connection and in total; a connection's QPs are destroyed when its Connect
// call ends (client closed it, its process or host died, or it failed to answer a QP reset in
// time), and its ops still in flight fail. The Connect calls themselves are RcConnectService's.
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
#include "daemon/transport/initiator.h"
#include "daemon/transport/rc/rc_connection.h"
#include "daemon/transport/rc/rc_options.h"
#include "daemon/verbs_core/verbs_core.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class RcInitiator final : public Initiator {
 public:
  // INVALID_ARGUMENT for a zero QP limit or send queue depth. `core` must outlive this.
  static absl::StatusOr<std::unique_ptr<RcInitiator>> Create(const RcInitiatorOptions& options,
                                                             VerbsCore* core);
  ~RcInitiator() override;

  TransportKind kind() const override { return TransportKind::kRc; }
  // FAILED_PRECONDITION for a connection id that is not open; RESOURCE_EXHAUSTED when the
  // connection's backlog is full; CANCELLED after Shutdown.
  absl::Status Submit(const TransferOp& op, OpDone done) override;
  // UNAVAILABLE when the housekeeping thread (reset deadlines, drain) has not come round
  // within `max_stall`.
  absl::Status CheckHealth(absl::Duration max_stall) const override;
  // New Connect calls are refused (UNAVAILABLE); open ones end once they are idle.
  void StartDrain() override;
  // Ends every Connect call (CANCELLED), flushes every QP and waits (bounded) for the flushes.
  void Shutdown() override;
  // in_use: QPs; clients: connections; errors / recoveries: QPs failed / reset and back.
  InitiatorStats stats() const override;
  std::string Describe() const override;
  // GetInfo's rc figures (QPs in use and their limits, connections).
  void FillInfo(gdrstore::v1::GetInfoResponse* info) const override;

  // For RcConnectService. Creates the connection for `hello` and fills `accept`;
  // RESOURCE_EXHAUSTED when no QP is left, UNAVAILABLE while draining. `peer` is the Connect
  // call's ServerContext::peer(): ops on the connection must come from the same address.
  absl::StatusOr<std::shared_ptr<RcConnection>> Accept(const gdrstore::v1::RcHello& hello,
                                                       absl::string_view peer,
                                                       RcControl* control,
                                                       gdrstore::v1::RcAccept* accept);
  // Closes connection `id` with `why`; its QPs are destroyed on the poller thread once flushed.
  void Release(uint64_t id, const absl::Status& why);

 private:
  RcInitiator(RcInitiatorOptions options, VerbsCore* core)
      : options_(std::move(options)), core_(core) {}
  void Housekeeping();

  const RcInitiatorOptions options_;
  VerbsCore* const core_;
  uint64_t chunk_bytes_ = 0;
  mutable absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<RcConnection>> connections_ ABSL_GUARDED_BY(mu_);
  // The peer of each connection's Connect call (same keys as connections_).
  std::map<uint64_t, std::string> owners_ ABSL_GUARDED_BY(mu_);
  uint32_t qps_in_use_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // QP errors / recoveries of connections already closed (live ones count their own).
  uint64_t closed_qp_errors_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t closed_qp_recoveries_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> housekeeping_ns_{0};  // start of the housekeeper's last round
  absl::Notification stop_;
  std::thread housekeeper_;
};

}  // namespace gdr
