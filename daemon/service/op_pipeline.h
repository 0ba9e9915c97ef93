// One data op's way through the daemon between its gRPC handler and its answer: the stages it
// passes (grants, msync, CRC, fault injection, admission, media timing, statistics, trace),
// each behind one interface (OpStage), assembled once at start-up; a stage the daemon does not
// run is simply not in the list. The op itself is one OpContext, allocated once when the
// handler starts it, which holds each stage's own per-op state without knowing its type.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/service/token_auth.h"
#include "daemon/store/direction.h"
#include "daemon/transport/transfer_op.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class OpPipeline;
class Volume;

// Which page of the per-volume figures a GetStats answer holds (gdrstore.proto
// GetStatsRequest): volumes named after `after`, at most `max_entries` (0: all of them, as the
// metrics exporter reads them).
struct StatsPage {
  std::string after;
  uint32_t max_entries = 0;
};

// What a stage sees of a request before anything about it is looked at (OpStage::OnRequest):
// valid only during that call.
struct OpRequest {
  const Caller& caller;
  Direction direction;
  const gdrstore::v1::Extent* extent;  // null: the request names none
};

// An op's answer, as the pipeline ends it.
struct OpAnswer {
  absl::Status status;
  uint64_t service_ns = 0;         // the daemon-side service time
  std::optional<uint32_t> crc32c;  // the crc stage's, only with an OK status
  std::string data;                // a Write answered inline, only with an OK status
};

// One op, from the handler to its answer. Each stage keeps what it needs of the op in its own
// slot here (OpStageOf's State), held inline, so an op costs one allocation however many stages
// run. The request fields are valid only until the handler's call returns (refusals are counted
// from them); the rest live as long as the op.
class OpContext {
 public:
  // The op's answer.
  using Done = std::function<void(OpAnswer)>;
  // The most stages a pipeline has, and the room each has for its per-op state.
  static constexpr size_t kMaxStages = 8;
  static constexpr size_t kStateBytes = 128;

  OpContext(const OpPipeline* pipeline, Direction direction, const gdrstore::v1::Extent* extent,
            const gdrstore::v1::RemoteBuffer* buffer, bool sync, bool crc,
            absl::string_view peer, absl::string_view client, Done done);
  ~OpContext();  // the stages' states, last slot first
  OpContext(const OpContext&) = delete;
  OpContext& operator=(const OpContext&) = delete;

  // A stage that held the op (OnTransferred returned false) hands it on to the next stage with
  // `status` updated as its step ended. Any thread.
  void Resume();

  // The request.
  const Direction direction;
  const gdrstore::v1::Extent* const extent;
  const gdrstore::v1::RemoteBuffer* const buffer;
  const bool sync;  // a put into a file volume is answered after msync
  const bool crc;   // the answer carries the CRC32C of the op's store bytes (the crc stage)
  const absl::string_view peer;
  const absl::string_view client;

  // Set once the op is validated, from the TransferOp.
  // Its volume, held until the answer: the stages after the transfer (msync) still use it.
  std::shared_ptr<const Volume> volume;
  uint64_t offset = 0;
  uint64_t length = 0;
  int64_t start_ns = 0;  // the one reading of the clock an op's times are measured from
  // The op's status as it goes: the transfer's, then as each stage's step leaves it.
  absl::Status status;
  // What a stage adds to the answer (OpAnswer): the crc stage's checksum.
  std::optional<uint32_t> crc32c;
  // A Write's bytes when its transport answered it inline (TransferOp::inline_answer).
  InlineAnswer inline_answer;

  // The state in slot `slot`, made (value-initialized) on first use and destroyed with the op.
  // Every use of a slot must name the same S: the pipeline gives each stage its own slot.
  template <class S>
  S& StateIn(size_t slot) {
    static_assert(sizeof(S) <= kStateBytes && alignof(S) <= alignof(std::max_align_t),
                  "a stage's per-op state must fit its slot");
    Slot& s = slots_[slot];
    if (s.destroy == nullptr) {
      new (s.bytes) S();
      s.destroy = [](std::byte* p) { std::launder(reinterpret_cast<S*>(p))->~S(); };
    }
    return *std::launder(reinterpret_cast<S*>(s.bytes));
  }

 private:
  friend class OpPipeline;
  friend class OpTicket;
  struct Slot {
    alignas(std::max_align_t) std::byte bytes[kStateBytes];
    void (*destroy)(std::byte*) = nullptr;  // null while the slot holds nothing
  };
  const OpPipeline* pipeline_;
  Done done_;
  size_t next_ = 0;  // the stage whose OnTransferred runs next
  std::array<Slot, kMaxStages> slots_;
};

// A step every op passes. Each hook has a default that does nothing, so a stage overrides only
// the phases it takes part in. Hooks run on whichever thread the op is on (a gRPC thread at
// start, a transport's completion thread after); they must not block.
class OpStage {
 public:
  virtual ~OpStage() = default;
  // For logs: "admission", "crc", "faults", "grants", "media", "msync", "stats", "trace".
  virtual const char* name() const = 0;
  // A request, before validation (or, on a Stream, the per-stream limit) looks at it. Not OK:
  // it is refused with that status; later stages' OnRequest do not run and no op starts.
  virtual absl::Status OnRequest(const OpRequest& request) { return absl::OkStatus(); }
  // A validated op starts (ctx.start_ns, offset, length set). Not OK: the op is refused with
  // that status; nothing starts and later stages' OnStart do not run.
  virtual absl::Status OnStart(OpContext& ctx, TransferOp& op) { return absl::OkStatus(); }
  // Its transfer and the stages before this one ended with ctx.status. true: go on at once;
  // false: the stage holds the op and calls ctx.Resume() once its step is done.
  virtual bool OnTransferred(OpContext& ctx) { return true; }
  // The op is answered now with ctx.status after `service_ns`: release, count, record.
  virtual void OnFinish(OpContext& ctx, uint64_t service_ns) {}
  // The op was refused with `why` (non-OK): before it started (no OnStart ran, or only some
  // of them) or by the transport after every OnStart ran; nothing of it was transferred.
  virtual void OnRefused(OpContext& ctx, const absl::Status& why) {}
  // Its part of a GetStats answer for `caller`: of per-volume figures, those of `page` (the
  // stats stage, which runs first, lists the page's volumes and sets next_page_after).
  virtual void FillStats(const Caller& caller, const StatsPage& page,
                         gdrstore::v1::GetStatsResponse* out) const {}

 protected:
  // This stage's slot in the OpContexts of the pipeline it is in.
  size_t slot() const { return slot_; }

 private:
  friend class OpPipeline;
  size_t slot_ = 0;
};

// A stage over one part of the daemon (`Part`, which must outlive every op) that keeps `State`
// per op in the op's context: value-initialized the first time a hook asks for it (so a hook
// of an op the stage never started sees the state empty), destroyed with the op.
template <class Part, class State>
class OpStageOf : public OpStage {
 public:
  explicit OpStageOf(Part* part) : part_(part) {}

 protected:
  State& state(OpContext& ctx) const { return ctx.template StateIn<State>(slot()); }
  Part* const part_;
};

// The stages in the order ops pass them. Read-only once serving: an op walks a fixed list.
class OpPipeline {
 public:
  // Each stage must outlive the pipeline and every op started through it, and be in one
  // serving pipeline only (its slot in the ops' contexts is its place here). At most
  // OpContext::kMaxStages; the daemon's list has eight.
  explicit OpPipeline(std::vector<OpStage*> stages = {});

  std::span<OpStage* const> stages() const { return stages_; }
  // Whether a stage of that name runs.
  bool Has(absl::string_view name) const;

  // A request before validation: runs every OnRequest in order. Not OK: it is refused,
  // counted as RefuseUnstarted counts and logged as Refuse logs.
  absl::Status Request(const OpRequest& request) const;
  // A validated op: runs every OnStart in order. OK: the op is the pipeline's and ends with
  // Transferred(); otherwise it has been refused (Refuse) and `ctx` is gone.
  absl::Status Start(std::unique_ptr<OpContext>& ctx, TransferOp& op) const;
  // The transfer of a started op ended: the stages' OnTransferred, then its answer.
  void Transferred(OpContext* ctx, absl::Status status) const;
  // Refuses an op (every stage's OnRefused), logging what a client could cause at line rate
  // when `log`. Deletes `ctx`.
  void Refuse(std::unique_ptr<OpContext> ctx, const absl::Status& why, bool log = true) const;
  // A refusal of a request that never became an op (a bad stream op, a missing grant): the
  // stages see it as an op that named nothing (the totals count it). Not logged.
  void RefuseUnstarted(absl::StatusCode code) const;

 private:
  friend class OpContext;
  void Continue(OpContext* ctx) const;
  void Finish(OpContext* ctx) const;

  std::vector<OpStage*> stages_;
};

// An op the pipeline started, until the transport has taken it: given back as refused if the
// transport does not (Submitted with its refusal, or dropped). Move-only.
class OpTicket {
 public:
  OpTicket() = default;
  explicit OpTicket(OpContext* ctx) : ctx_(ctx) {}
  OpTicket(OpTicket&& o) noexcept : ctx_(std::exchange(o.ctx_, nullptr)) {}
  OpTicket& operator=(OpTicket&& o) noexcept;
  OpTicket(const OpTicket&) = delete;
  OpTicket& operator=(const OpTicket&) = delete;
  ~OpTicket();

  // The transport's answer to the op's submission. OK: the op is the transport's (its
  // completion ends it; it may already have); otherwise it is refused with `status`.
  void Submitted(const absl::Status& status);

 private:
  OpContext* ctx_ = nullptr;
};

// Refusals a client can cause at line rate are logged at most every few seconds (the counts
// are in GetStats); pressure and shutdown refusals are expected and only counted.
void LogRefusal(const absl::Status& s);

}  // namespace gdr
