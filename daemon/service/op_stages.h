// The stages of the op pipeline (op_pipeline.h), each running one part of daemon/sim or
// daemon/observe (or the store's msync) on every op. The daemon lists them in this order:
//   msync -> faults -> admission -> media -> stats -> trace
// so that a fault's refusal comes before admission takes a permit, only admitted ops book the
// simulated device or count as started, and after the transfer an op is synced, then gets its
// corrupt byte and stall, then waits for its media slot, then is answered.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "daemon/observe/stats.h"
#include "daemon/observe/trace_recorder.h"
#include "daemon/service/inflight_limiter.h"
#include "daemon/service/op_pipeline.h"
#include "daemon/sim/delay_queue.h"
#include "daemon/sim/fault_injector.h"
#include "daemon/sim/media_timing.h"
#include "daemon/store/store.h"
#include "daemon/store/sync_worker.h"
#include "daemon/transport/transport_set.h"

namespace gdr {

// What the fault rules decided for one op beyond refusing it.
struct OpFault {
  std::shared_ptr<StallHold> stall;  // held after the transfer while its rules stand
  std::optional<uint64_t> corrupt;   // random bits picking the byte and bit to flip
  TransferOp op;                     // the op, for its corrupt byte (only with `corrupt`)
};

// Global admission: ops and bytes in flight (InflightLimiter, owned by the service).
class AdmissionStage final : public OpStage {
 public:
  explicit AdmissionStage(InflightLimiter* limiter) : limiter_(limiter) {}
  const char* name() const override { return "admission"; }
  absl::Status OnStart(OpContext& ctx, TransferOp& op) override;
  void OnFinish(OpContext& ctx, uint64_t service_ns) override;

 private:
  InflightLimiter* limiter_;
};

// Read{sync=true} into a file-backed volume: msync of the extent on the sync worker before the
// answer.
class SyncStage final : public OpStage {
 public:
  explicit SyncStage(SyncWorker* syncer) : syncer_(syncer) {}
  const char* name() const override { return "msync"; }
  // The file volume an op so described must msync before answering; nullptr when none.
  static const Volume* VolumeToSync(const Volume* volume, Direction direction, bool sync);
  absl::Status OnStart(OpContext& ctx, TransferOp& op) override;
  bool OnTransferred(OpContext& ctx) override;

 private:
  SyncWorker* syncer_;
};

// Injected faults (FaultInjector): an error refuses the op, a transport fault rides on it
// (TransferOp::inject), a corrupt one sends one flipped byte after the op's own bytes, a stall
// holds its answer.
class FaultStage final : public OpStage {
 public:
  // Each must outlive every op. `transports` moves a corrupt byte; `store` holds its source.
  FaultStage(FaultInjector* faults, DelayQueue* delays, const Store* store,
             TransportSet* transports)
      : faults_(faults), delays_(delays), store_(store), transports_(transports) {}
  const char* name() const override { return "faults"; }
  absl::Status OnStart(OpContext& ctx, TransferOp& op) override;
  bool OnTransferred(OpContext& ctx) override;
  void FillStats(const Caller& caller, const StatsPage& page,
                 gdrstore::v1::GetStatsResponse* out) const override;

 private:
  // The corrupt byte: one byte of the op's extent with one bit flipped, written into the
  // caller's buffer from the store's fault source. Runs on the delay queue's thread, not
  // inside the transfer's completion; resumes the op once the byte has landed.
  void DeliverCorruptByte(OpContext& ctx);
  // The stall, if any: true when the op may go on at once.
  bool Hold(OpContext& ctx);

  FaultInjector* faults_;
  DelayQueue* delays_;
  const Store* store_;
  TransportSet* transports_;
};

// Simulated media timing: every op books its slot on its volume's device model at start and is
// answered no earlier than the slot ends.
class MediaStage final : public OpStage {
 public:
  MediaStage(MediaTiming* media, DelayQueue* delays) : media_(media), delays_(delays) {}
  const char* name() const override { return "media"; }
  absl::Status OnStart(OpContext& ctx, TransferOp& op) override;
  bool OnTransferred(OpContext& ctx) override;
  void FillStats(const Caller& caller, const StatsPage& page,
                 gdrstore::v1::GetStatsResponse* out) const override;

 private:
  MediaTiming* media_;
  DelayQueue* delays_;
};

// Op accounting (DaemonStats): resolved and counted as started once at start, finished once;
// a refused op is counted where it was refused.
class StatsStage final : public OpStage {
 public:
  explicit StatsStage(DaemonStats* stats) : stats_(stats) {}
  const char* name() const override { return "stats"; }
  absl::Status OnStart(OpContext& ctx, TransferOp& op) override;
  void OnFinish(OpContext& ctx, uint64_t service_ns) override;
  void OnRefused(OpContext& ctx, const absl::Status& why) override;
  // The op counters GetStats answers: per-volume figures of the volumes `caller` may see only
  // (the page of them), and with a credential its own client entry only.
  void FillStats(const Caller& caller, const StatsPage& page,
                 gdrstore::v1::GetStatsResponse* out) const override;

 private:
  DaemonStats* stats_;
};

// --trace: every answered op recorded.
class TraceStage final : public OpStage {
 public:
  explicit TraceStage(TraceRecorder* trace) : trace_(trace) {}
  const char* name() const override { return "trace"; }
  absl::Status OnStart(OpContext& ctx, TransferOp& op) override;
  void OnFinish(OpContext& ctx, uint64_t service_ns) override;
  void FillStats(const Caller& caller, const StatsPage& page,
                 gdrstore::v1::GetStatsResponse* out) const override;

 private:
  TraceRecorder* trace_;
};

}  // namespace gdr
