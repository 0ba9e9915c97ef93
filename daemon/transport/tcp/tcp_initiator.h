// The tcp transport's initiator pool: the stand-in for a DCI pool. Links (connections) to client
// targets are reused per destination and capped in total; an op is split into chunks spread
// over its destination's links and pipelined. Like a DCI pool it serves more destinations than
// it has links by scheduling, never by refusing: a destination with no link waits in FIFO order;
// a link that has served its destination for a turn is retired (takes no new work), and once
// its last chunk completes it is closed and a link to the next waiting destination opened. A
// retired link that does not drain within the handover timeout has its ops failed, so a stuck
// client cannot hold a link others wait for. A housekeeping thread fails stalled links, closes
// idle ones, reaps dead ones and retires links whose turn is over, so a vanished client never
// leaks a socket or a thread.
// A link is pooled under its destination, the caller's address class and a digest of the
// endpoint's secret: it was checked against the TcpTargetRule for that caller and proved for
// that secret, and carries no op that differs in either.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <span>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/transport/initiator.h"
#include "daemon/transport/tcp/tcp_destination.h"
#include "daemon/transport/tcp/tcp_link.h"
#include "daemon/transport/tcp/tcp_options.h"

namespace gdr {

class TcpInitiator final : public Initiator {
 public:
  // INVALID_ARGUMENT on an option out of range.
  static absl::StatusOr<std::unique_ptr<TcpInitiator>> Create(TcpInitiatorOptions options);
  ~TcpInitiator() override;

  // CANCELLED after Shutdown; PERMISSION_DENIED, before any connection, for a target given as
  // an address literal that the TcpTargetRule refuses for the op's caller (a host name is
  // checked once resolved, on the link: the op then fails the same way). Otherwise the op is
  // taken: it starts now, or waits for a link (DEADLINE_EXCEEDED after the op timeout).
  absl::Status Submit(const TransferOp& op, OpDone done) override;
  void SubmitBatch(std::span<Submission> batch) override;
  void Shutdown() override;
  // UNAVAILABLE when the housekeeping thread (stall detection, idle close, reaping; it also runs
  // the completions of the links it fails) has not come round within `max_stall`, or when a
  // link's receiver (its completion poller) has been inside one completion for longer.
  absl::Status CheckHealth(absl::Duration max_stall) const override;
  TransportKind kind() const override { return TransportKind::kTcp; }
  // buffer.tcp, as ParseTcpDestination reads it.
  absl::StatusOr<std::shared_ptr<const Destination>> ParseDestination(
      const gdrstore::v1::RemoteBuffer& buffer) const override {
    return ParseTcpDestination(buffer);
  }
  // in_use: links; clients: destinations with links; errors: links lost to a failure (not
  // the idle closes and handovers the pool chose); waiting: ops waiting for a link; handovers:
  // links closed so that a waiting destination could have one.
  InitiatorStats stats() const override;
  std::string Describe() const override;

 private:
  explicit TcpInitiator(TcpInitiatorOptions options);
  // Chunks planned for each link by one call, enqueued together at its end (under mu_), then
  // sent and failed ops completed once mu_ is released (Finish).
  struct Plan {
    std::vector<std::shared_ptr<TcpLink>> links;
    std::vector<std::vector<Chunk>> chunks;  // per link
    std::vector<uint64_t> bytes;             // per link
    std::vector<std::shared_ptr<TcpLink>> claimed;          // send tokens taken by Enqueue
    std::vector<std::pair<OpDone, absl::Status>> failed;    // completions to run unlocked
    std::vector<std::shared_ptr<TcpLink>> dropped;          // injected faults: fail, then send
    size_t IndexOf(const std::shared_ptr<TcpLink>& link);
  };
  // An op waiting for its destination to get a link.
  struct Waiter {
    TransferOp op;
    OpDone done;
    absl::Time since;
  };
  void Housekeeping();
  // Splits `op` into chunks over its destination's links (opening one if the pool has room or
  // an idle link whose turn is over can be closed) and adds them to `plan`, or queues the op
  // when its destination has no link (nor waits already). On a non-OK return nothing of `op`
  // is in `plan` and `done` was not taken.
  absl::Status PlanLocked(const TransferOp& op, OpDone& done, Plan& plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<TcpLink> NewLinkLocked(const TransferOp& op, const std::string& key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes the longest-idle link of another destination whose turn is over (never one that
  // `plan` has chunks for); false when there is none.
  bool EvictIdleLocked(const std::string& key, const Plan& plan, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives links to waiting destinations while the pool has room, then retires links whose turn
  // is over until every waiting destination has one on its way.
  void ScheduleLocked(absl::Time now, Plan& plan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandOverLocked(Plan& plan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes a link with nothing outstanding that leaves its destination for a waiting one.
  void HandedOverLocked(std::shared_ptr<TcpLink> link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A retired link finished (or failed) its last chunk: close it, hand its place over.
  void OnDrained(TcpLink* link);
  void EnqueueLocked(Plan& plan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Finish(Plan& plan);
  void ReapDeadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves a dead link out of the pool (its threads are joined later, outside mu_).
  void BuryLocked(std::shared_ptr<TcpLink> link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TcpInitiatorOptions options_;
  const std::shared_ptr<const TcpTargetRule> rule_;
  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // Keyed by host:port, caller class and secret digest (binary; never logged: messages name a
  // link by its destination()).
  std::map<std::string, std::vector<std::shared_ptr<TcpLink>>> links_ ABSL_GUARDED_BY(mu_);
  // Links retired from their destination, draining; still counted in total_links_.
  std::vector<std::shared_ptr<TcpLink>> retiring_ ABSL_GUARDED_BY(mu_);
  // Destinations without a link, in the order they started waiting, and their ops.
  std::deque<std::string> wait_order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::deque<Waiter>> waiting_ ABSL_GUARDED_BY(mu_);
  uint64_t waiting_ops_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t handovers_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t total_links_ ABSL_GUARDED_BY(mu_) = 0;
  // Links out of the pool whose threads still need joining (done outside mu_).
  std::vector<std::shared_ptr<TcpLink>> graveyard_ ABSL_GUARDED_BY(mu_);
  uint64_t link_errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> ops_in_flight_{0};
  absl::Notification stop_;
  std::atomic<int64_t> housekeeping_ns_{0};  // start of the housekeeper's last round
  std::thread housekeeper_;
};

}  // namespace gdr
