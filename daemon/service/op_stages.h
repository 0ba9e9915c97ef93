// The stages of the op pipeline (op_pipeline.h), each running one part of daemon/sim or
// daemon/observe (or the store's msync, the caller's grants, the CRC answer) on every op, each
// with its own per-op state (the State of its OpStageOf). The daemon names them in this order
// (kOpStageOrder):
//   grants -> msync -> crc -> faults -> admission -> media -> stats -> trace
// so that a request without a grant is refused before anything looks at it, a fault's refusal
// comes before admission takes a permit, only admitted ops book the simulated device or count
// as started, and after the transfer an op is synced, then checksummed, then gets its corrupt
// byte and stall, then waits for its media slot, then is answered.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/wire/trace_format.h"
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

// The order ops pass the daemon's stages, by OpStage::name().
inline constexpr std::array<const char*, 8> kOpStageOrder = {
    "grants", "msync", "crc", "faults", "admission", "media", "stats", "trace"};
static_assert(kOpStageOrder.size() <= OpContext::kMaxStages);

// `stages` put in kOpStageOrder: the daemon names the stages it runs, and one it does not run
// (no --trace) is simply absent. INVALID_ARGUMENT naming a stage kOpStageOrder does not name,
// or one given twice.
absl::StatusOr<std::vector<OpStage*>> InStageOrder(const std::vector<OpStage*>& stages);

// What the fault rules decided for one op beyond refusing it.
struct OpFault {
  std::shared_ptr<StallHold> stall;  // held after the transfer while its rules stand
  std::optional<uint64_t> corrupt;   // random bits picking the byte and bit to flip
  TransferOp op;                     // the op, for its corrupt byte (only with `corrupt`)
};

// Per-volume rights (token_auth.h): a request on a volume the caller has no grant for is refused
// in OnRequest, before validation, so that the refusal does not tell whether the volume exists.
// A request without an extent is left to validation. Keeps nothing per op.
class GrantStage final : public OpStage {
 public:
  const char* name() const override { return "grants"; }
  // PERMISSION_DENIED as Caller::Allows words it.
  absl::Status OnRequest(const OpRequest& request) override;
};

// WriteRequest/ReadRequest.crc32c: once an op asking for it has moved its bytes (and synced
// them), the CRC32C of its extent's store bytes goes into its answer (OpContext::crc32c). A
// volume's mapping that faults meanwhile (a file truncated under it) leaves the answer without
// one, which the client fails. Keeps nothing per op beyond the answer.
class CrcStage final : public OpStage {
 public:
  const char* name() const override { return "crc"; }
  bool OnTransferred(OpContext& ctx) override;
};

// Global admission: ops and bytes in flight (InflightLimiter, owned by the service); an op
// holds its permit until it is answered.
class AdmissionStage final : public OpStageOf<InflightLimiter, InflightLimiter::Permit> {
 public:
  using OpStageOf::OpStageOf;
  const char* name() const override { return "admission"; }
  absl::Status OnStart(OpContext& ctx, TransferOp& op) override;
  void OnFinish(OpContext& ctx, uint64_t service_ns) override;
};

// Read{sync=true} into a file-backed volume: msync of the extent on the sync worker before the
// answer. Per op: the volume to msync, null when none (the op holds it until it is answered).
class SyncStage final : public OpStageOf<SyncWorker, const Volume*> {
 public:
  using OpStageOf::OpStageOf;
  const char* name() const override { return "msync"; }
  // The file volume an op so described must msync before answering; nullptr when none.
  static const Volume* VolumeToSync(const Volume* volume, Direction direction, bool sync);
  absl::Status OnStart(OpContext& ctx, TransferOp& op) override;
  bool OnTransferred(OpContext& ctx) override;
};

// Injected faults (FaultInjector): an error refuses the op, a transport fault rides on it
// (TransferOp::inject), a corrupt one sends one flipped byte after the op's own bytes, a stall
// holds its answer. Per op: what the rules decided when one hit it (stall, corrupt), else null.
class FaultStage final : public OpStageOf<FaultInjector, std::unique_ptr<OpFault>> {
 public:
  // Each must outlive every op. `transports` moves a corrupt byte; `store` holds its source.
  FaultStage(FaultInjector* faults, DelayQueue* delays, const Store* store,
             TransportSet* transports)
      : OpStageOf(faults), delays_(delays), store_(store), transports_(transports) {}
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

  DelayQueue* delays_;
  const Store* store_;
  TransportSet* transports_;
};

// When an op may be answered at the earliest: the end of its slot on the simulated device.
struct MediaSlot {
  absl::Time ready_at = absl::InfinitePast();  // no model, or not booked
};

// Simulated media timing: every op books its slot on its volume's device model at start and is
// answered no earlier than the slot ends.
class MediaStage final : public OpStageOf<MediaTiming, MediaSlot> {
 public:
  MediaStage(MediaTiming* media, DelayQueue* delays) : OpStageOf(media), delays_(delays) {}
  const char* name() const override { return "media"; }
  absl::Status OnStart(OpContext& ctx, TransferOp& op) override;
  bool OnTransferred(OpContext& ctx) override;
  void FillStats(const Caller& caller, const StatsPage& page,
                 gdrstore::v1::GetStatsResponse* out) const override;

 private:
  DelayQueue* delays_;
};

// The counters an op is accounted in, and whether it was counted as started.
struct OpCounted {
  OpScopes scopes;
  bool started = false;
};

// Op accounting (DaemonStats): resolved and counted as started once at start, finished once;
// a refused op is counted where it was refused. GetStats: the op counters, per-volume figures
// of the volumes the caller may see only (the page of them), and with a credential its own
// client entry only.
class StatsStage final : public OpStageOf<DaemonStats, OpCounted> {
 public:
  using OpStageOf::OpStageOf;
  const char* name() const override { return "stats"; }
  absl::Status OnStart(OpContext& ctx, TransferOp& op) override;
  void OnFinish(OpContext& ctx, uint64_t service_ns) override;
  void OnRefused(OpContext& ctx, const absl::Status& why) override;
  void FillStats(const Caller& caller, const StatsPage& page,
                 gdrstore::v1::GetStatsResponse* out) const override;
};

// --trace: every answered op recorded. Per op: its entry, filled when it starts and recorded
// with its answer.
class TraceStage final : public OpStageOf<TraceRecorder, std::optional<trace::OpEvent>> {
 public:
  using OpStageOf::OpStageOf;
  const char* name() const override { return "trace"; }
  absl::Status OnStart(OpContext& ctx, TransferOp& op) override;
  void OnFinish(OpContext& ctx, uint64_t service_ns) override;
  void FillStats(const Caller& caller, const StatsPage& page,
                 gdrstore::v1::GetStatsResponse* out) const override;
};

}  // namespace gdr
