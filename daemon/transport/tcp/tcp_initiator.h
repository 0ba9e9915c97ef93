// The tcp transport's initiator pool: the stand-in for a DCI pool. Links (connections) to client
// targets are reused per destination and capped in total; an op is split into chunks spread
// over its destination's links and pipelined. A destination with bytes for more links than its
// share opens more while the pool has room, and gives those back first when others need them.
// Like a DCI pool it serves more destinations than it has links by scheduling, never by
// refusing: a destination with no link waits in FIFO order; a link that has served its
// destination for a turn is retired (takes no new work), and once its last chunk completes it
// is closed and a link to the next waiting destination opened. A
// retired link that does not drain within the handover timeout has its ops failed, so a stuck
// client cannot hold a link others wait for. A housekeeping thread fails stalled links, closes
// idle ones, reaps dead ones and retires links whose turn is over, so a vanished client never
// leaks a socket or a thread. Those decisions are TcpLinkScheduler's (tcp_link_scheduler.h);
// this class opens the links it asks for, builds and sends the chunks it places and runs the
// housekeeping.
// A link is pooled under its destination, the caller's address class and a digest of the
// endpoint's secret: it was checked against the TcpTargetRule for that caller and proved for
// that secret, and carries no op that differs in either.
#pragma once

#include <atomic>
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
#include "daemon/transport/tcp/tcp_link_scheduler.h"
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
  using Scheduler = TcpLinkScheduler<TcpLink>;
  explicit TcpInitiator(TcpInitiatorOptions options);
  // What one call planned: the scheduler's placement, built into chunks per link as it goes,
  // enqueued together at the call's end (under mu_), then sent and failed ops completed once
  // mu_ is released (Finish).
  struct Plan final : Scheduler::Plan {
    explicit Plan(std::atomic<uint64_t>* in_flight) : in_flight(in_flight) {}
    void BeginOp(const TransferOp& op, OpDone& done, uint32_t chunks) override;
    void AddChunk(const TransferOp& op, size_t link, uint64_t offset, uint32_t length) override;

    std::atomic<uint64_t>* const in_flight;
    std::shared_ptr<OpState> op;  // of the op being placed
    tcpwire::Opcode opcode = tcpwire::Opcode::kWriteReq;
    std::vector<std::vector<Chunk>> chunks;                 // per link, as links()
    std::vector<std::shared_ptr<TcpLink>> claimed;          // send tokens taken by Enqueue
    std::vector<std::pair<OpDone, absl::Status>> failed;    // completions to run unlocked
    std::vector<std::shared_ptr<TcpLink>> dropped;          // injected faults: fail, then send
  };
  void Housekeeping();
  // A Write the client takes inline (TcpEndpoint.inline_max, within options_.inline_max), and
  // an op writing into client memory whose bytes already went into the same answer (the
  // corrupt-byte fault): its bytes are copied into op.inline_answer and `done` runs before this
  // returns; no link is involved. False: the op goes over a link as ever (so do an op carrying
  // an injected fault and one to a target the rule refuses, which fail the way they always do).
  bool TryInline(const TransferOp& op, OpDone& done) const;
  // The rule's verdict on `op`'s target when it is an address literal (a host name is judged
  // once resolved, on the link); OK otherwise.
  absl::Status CheckLiteralTarget(const TransferOp& op) const;
  // Checks `op`'s target (an address literal) against the rule and returns the key of its
  // links in the pool. Needs no lock: the callers run it before taking mu_, since the key's
  // SHA-256 and the rule cost more than the placement and every client's ops queue on mu_.
  absl::StatusOr<std::string> KeyOf(const TransferOp& op) const;
  // A retired link finished (or failed) its last chunk: close it, hand its place over.
  void OnDrained(TcpLink* link);
  void EnqueueLocked(Plan& plan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Finish(Plan& plan);

  const TcpInitiatorOptions options_;
  const std::shared_ptr<const TcpTargetRule> rule_;
  mutable absl::Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // The pool: links keyed by host:port, caller class and secret digest (binary; never logged:
  // messages name a link by its destination()), and the ops waiting for one.
  Scheduler scheduler_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> ops_in_flight_{0};
  absl::Notification stop_;
  std::atomic<int64_t> housekeeping_ns_{0};  // start of the housekeeper's last round
  std::thread housekeeper_;
};

}  // namespace gdr
