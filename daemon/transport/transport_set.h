// The transports a daemon runs, and why the others are absent. Everything the daemon asks of
// its transports goes through here (reading a request's endpoint, each op, health, drain,
// shutdown, stats, client counts, log names, GetInfo), so a transport appears everywhere once
// it is added, and nothing above knows an endpoint's fields.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/transport/initiator.h"
#include "daemon/verbs_core/rail_set.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class TransportSet {
 public:
  TransportSet();
  // Takes `initiator` into the set (its kind must not be there yet). Before serving only.
  void Add(std::unique_ptr<Initiator> initiator);
  // GetInfo's line for a transport that is not running (e.g. "disabled by configuration").
  void SetAbsent(TransportKind kind, std::string why);
  // The rails under the verbs transports: GetInfo's rdma and rails, GetStats' rails and a
  // watchdog probe. Must outlive the set; null (the default) when no device is open.
  void set_rails(const RailSet* rails) { rails_ = rails; }

  Initiator* Find(TransportKind kind) const { return slots_[Index(kind)].get(); }
  // The kinds running here (those ValidateOp accepts).
  OfferedTransports offered() const;
  // The destination `kind`'s initiator reads from `buffer` (Initiator::ParseDestination);
  // UNIMPLEMENTED naming the transport when it is not running. Thread-safe once serving.
  absl::StatusOr<std::shared_ptr<const Destination>> ParseDestination(
      TransportKind kind, const gdrstore::v1::RemoteBuffer& buffer) const;
  // A running transport's Describe(), or why the transport is absent.
  std::string Describe(TransportKind kind) const;
  // "tcp, rc, dc": the running transports in the set's order, for log and STATUS lines.
  std::string Names() const;

  // UNIMPLEMENTED naming the transport when it is not running; otherwise its initiator's answer.
  absl::Status Submit(const TransferOp& op, OpDone done);
  // Hands each transport its ops as one batch (so the tcp initiator still shares sends).
  void SubmitBatch(std::span<Submission> batch);

  // The first transport (or a rail's poller or port watch) that is stuck; each names itself.
  absl::Status CheckHealth(absl::Duration max_stall) const;
  void StartDrain();
  // Shuts every transport down (idempotent), in the reverse of the order they were added.
  void Shutdown();

  // Clients with live state in any transport.
  uint32_t clients() const;
  // One TransportInfo per transport (running or not) and, with a device open, the first rail's
  // RdmaInfo and every rail's RailInfo.
  void FillInfo(gdrstore::v1::GetInfoResponse* info) const;
  // The pool of each running transport into `stats`'s per-transport entries (added when absent),
  // and each rail's counters.
  void FillStats(gdrstore::v1::GetStatsResponse* stats) const;

 private:
  static size_t Index(TransportKind kind) { return static_cast<size_t>(kind); }
  static absl::Status NotRunning(TransportKind kind);

  std::array<std::unique_ptr<Initiator>, std::size(kTransportKinds)> slots_;
  std::array<std::string, std::size(kTransportKinds)> absent_;
  std::vector<TransportKind> order_;  // as added
  const RailSet* rails_ = nullptr;
};

}  // namespace gdr
