// The rc transport's initiator: the table of client connections over the daemon's rails (each
// a device port with the store's volumes registered once and its own completion poller). A
// connection lives on the one rail its Connect call picked (RcHello.rail; empty: the first
// serving rail): its QPs, its poller, its volumes' lkeys and its counters are that rail's. The
// number of RC QPs is bounded per connection and per rail; a connection's QPs are destroyed
// when its Connect call ends (client closed it, its process or host died, or it failed to
// answer a QP reset in time), and its ops still in flight fail. The Connect calls themselves
// are RcConnectService's.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/transport/initiator.h"
#include "daemon/transport/rc/rc_connection.h"
#include "daemon/transport/rc/rc_destination.h"
#include "daemon/transport/rc/rc_options.h"
#include "daemon/verbs_core/rail_set.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class RcInitiator final : public Initiator {
 public:
  // INVALID_ARGUMENT for a zero QP limit or send queue depth. `rails` must outlive this.
  static absl::StatusOr<std::unique_ptr<RcInitiator>> Create(const RcInitiatorOptions& options,
                                                             const RailSet* rails);
  ~RcInitiator() override;

  TransportKind kind() const override { return TransportKind::kRc; }
  // buffer.rc, as ParseRcDestination reads it.
  absl::StatusOr<std::shared_ptr<const Destination>> ParseDestination(
      const gdrstore::v1::RemoteBuffer& buffer) const override {
    return ParseRcDestination(buffer);
  }
  // FAILED_PRECONDITION for a connection id that is not open; UNAVAILABLE naming the rail when
  // the connection's rail is not serving; RESOURCE_EXHAUSTED when the connection's backlog is
  // full; CANCELLED after Shutdown.
  absl::Status Submit(const TransferOp& op, OpDone done) override;
  // UNAVAILABLE when the housekeeping thread (reset deadlines, drain) has not come round
  // within `max_stall`.
  absl::Status CheckHealth(absl::Duration max_stall) const override;
  // New Connect calls are refused (UNAVAILABLE); open ones end once they are idle.
  void StartDrain() override;
  // Ends every Connect call (CANCELLED), flushes every QP and waits (bounded) for the flushes.
  void Shutdown() override;
  // in_use: QPs; capacity: --rc-max-qps on every rail; clients: connections; errors /
  // recoveries: QPs failed / reset and back.
  InitiatorStats stats() const override;
  std::string Describe() const override;
  // GetInfo's rc figures (QPs in use and their limits, connections), daemon-wide.
  void FillInfo(gdrstore::v1::GetInfoResponse* info) const override;

  // For RcConnectService. Creates the connection for `hello` on the rail it names (empty: the
  // first serving rail) and fills `accept`; INVALID_ARGUMENT listing the rails for a rail the
  // daemon does not have, UNAVAILABLE naming the rail when it is not serving (or naming every
  // rail when none is) and while draining, RESOURCE_EXHAUSTED when the rail has no QP left.
  // `peer` is the Connect call's ServerContext::peer(): ops on the connection must come from
  // the same address.
  absl::StatusOr<std::shared_ptr<RcConnection>> Accept(const gdrstore::v1::RcHello& hello,
                                                       absl::string_view peer,
                                                       RcControl* control,
                                                       gdrstore::v1::RcAccept* accept);
  // Closes connection `id` with `why`; its QPs are destroyed on its rail's poller thread once
  // flushed.
  void Release(uint64_t id, const absl::Status& why);

 private:
  RcInitiator(RcInitiatorOptions options, const RailSet* rails)
      : options_(std::move(options)), rails_(rails), qps_in_use_(rails->size(), 0) {}
  void Housekeeping();
  uint32_t QpsInUseLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RcInitiatorOptions options_;
  const RailSet* const rails_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<RcConnection>> connections_ ABSL_GUARDED_BY(mu_);
  // The peer of each connection's Connect call (same keys as connections_).
  std::map<uint64_t, std::string> owners_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> qps_in_use_ ABSL_GUARDED_BY(mu_);  // by rail index
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
