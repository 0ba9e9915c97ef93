// The tcp transport's initiator pool: the stand-in for a DCI pool. Links (connections) to client
// targets are reused per destination and capped in total; an op is split into chunks spread
// over its destination's links and pipelined. A housekeeping thread fails stalled links, closes
// idle ones and reaps dead ones, so a vanished client never leaks a socket or a thread.
// A link is pooled under its destination, the caller's address class and a digest of the
// endpoint's secret: it was checked against the TcpTargetRule for that caller and proved for
// that secret, and carries no op that differs in either.
#pragma once

#include <atomic>
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
#include "daemon/transport/tcp/tcp_link.h"
#include "daemon/transport/tcp/tcp_options.h"

namespace gdr {

class TcpInitiator final : public Initiator {
 public:
  // INVALID_ARGUMENT on an option out of range.
  static absl::StatusOr<std::unique_ptr<TcpInitiator>> Create(TcpInitiatorOptions options);
  ~TcpInitiator() override;

  // RESOURCE_EXHAUSTED when the destination has no link and none can be opened (pool full of
  // busy links); CANCELLED after Shutdown; PERMISSION_DENIED, before any connection, for a
  // target given as an address literal that the TcpTargetRule refuses for the op's caller (a
  // host name is checked once resolved, on the link: the op then fails the same way).
  absl::Status Submit(const TransferOp& op, OpDone done) override;
  // The ops of a batch bound for one link go out in one send (up to the link's batch size).
  void SubmitBatch(std::span<Submission> batch) override;
  void Shutdown() override;
  // UNAVAILABLE when the housekeeping thread (stall detection, idle close, reaping; it also runs
  // the completions of the links it fails) has not come round within `max_stall`, or when a
  // link's receiver (its completion poller) has been inside one completion for longer.
  absl::Status CheckHealth(absl::Duration max_stall) const override;
  TransportKind kind() const override { return TransportKind::kTcp; }
  // in_use: links; clients: destinations with links; errors: links lost to a failure (not
  // the idle closes and evictions the pool chose).
  InitiatorStats stats() const override;
  std::string Describe() const override;

 private:
  explicit TcpInitiator(TcpInitiatorOptions options);
  // Chunks planned for each link by one Submit/SubmitBatch call, enqueued together at its end.
  struct Plan {
    std::vector<std::shared_ptr<TcpLink>> links;
    std::vector<std::vector<Chunk>> chunks;  // per link
    std::vector<uint64_t> bytes;             // per link
    size_t IndexOf(const std::shared_ptr<TcpLink>& link);
  };
  void Housekeeping();
  // Splits `op` into chunks over its destination's links (opening links as needed) and adds
  // them to `plan`. On a non-OK return nothing of `op` is in `plan` and `done` was not taken.
  absl::Status PlanLocked(const TransferOp& op, OpDone& done, Plan& plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens a link for `op` under `key` if the pool allows, evicting an idle link of another key
  // (never one that `plan` has chunks for).
  std::shared_ptr<TcpLink> OpenLinkLocked(const TransferOp& op, const std::string& key,
                                          const Plan& plan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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
