#include "daemon/service/op_pipeline.h"

#include <cstdlib>

#include "absl/time/clock.h"
#include "common/base/log.h"
#include "daemon/service/op_stages.h"

namespace gdr {

void LogRefusal(const absl::Status& s) {
  if (absl::IsResourceExhausted(s) || absl::IsUnavailable(s) || absl::IsCancelled(s)) return;
  GDR_LOG_EVERY_N_SEC(kWarning, 10) << "refused op: " << s;
}

OpContext::OpContext(const OpPipeline* pipeline, Direction direction,
                     const gdrstore::v1::Extent* extent, const gdrstore::v1::RemoteBuffer* buffer,
                     bool sync, bool crc, absl::string_view peer, absl::string_view client,
                     Done done)
    : direction(direction),
      extent(extent),
      buffer(buffer),
      sync(sync),
      crc(crc),
      peer(peer),
      client(client),
      pipeline_(pipeline),
      done_(std::move(done)) {}

OpContext::~OpContext() {
  for (size_t i = slots_.size(); i-- > 0;) {
    if (slots_[i].destroy != nullptr) slots_[i].destroy(slots_[i].bytes);
  }
}

void OpContext::Resume() { pipeline_->Continue(this); }

OpPipeline::OpPipeline(std::vector<OpStage*> stages) : stages_(std::move(stages)) {
  // More stages than an op has slots is a mistake in the code (op_stages.h's order has fewer
  // names; a static_assert keeps it so), never an input: stop at start-up, not mid-op.
  if (stages_.size() > OpContext::kMaxStages) {
    GDR_LOG(kError) << "op pipeline of " << stages_.size() << " stages; at most "
                    << OpContext::kMaxStages;
    std::abort();
  }
  for (size_t i = 0; i < stages_.size(); ++i) stages_[i]->slot_ = i;
}

bool OpPipeline::Has(absl::string_view name) const {
  for (const OpStage* s : stages_) {
    if (name == s->name()) return true;
  }
  return false;
}

absl::Status OpPipeline::Request(const OpRequest& request) const {
  for (OpStage* s : stages_) {
    absl::Status st = s->OnRequest(request);
    if (!st.ok()) {
      // Counted in the totals only: per-volume figures belong to those who may see the volume.
      RefuseUnstarted(st.code());
      LogRefusal(st);
      return st;
    }
  }
  return absl::OkStatus();
}

absl::Status OpPipeline::Start(std::unique_ptr<OpContext>& ctx, TransferOp& op) const {
  ctx->volume = op.store_volume;
  for (OpStage* s : stages_) {
    absl::Status st = s->OnStart(*ctx, op);
    if (!st.ok()) {
      Refuse(std::move(ctx), st);
      return st;
    }
  }
  return absl::OkStatus();
}

void OpPipeline::Transferred(OpContext* ctx, absl::Status status) const {
  ctx->status = std::move(status);
  ctx->next_ = 0;
  Continue(ctx);
}

void OpPipeline::Continue(OpContext* ctx) const {
  while (ctx->next_ < stages_.size()) {
    OpStage* s = stages_[ctx->next_++];
    // A stage that holds the op may have it resumed on another thread at once: ctx is not
    // touched again here.
    if (!s->OnTransferred(*ctx)) return;
  }
  Finish(ctx);
}

void OpPipeline::Finish(OpContext* ctx) const {
  std::unique_ptr<OpContext> owned(ctx);
  const uint64_t ns = static_cast<uint64_t>(absl::GetCurrentTimeNanos() - ctx->start_ns);
  for (OpStage* s : stages_) s->OnFinish(*ctx, ns);
  if (!ctx->status.ok() && !absl::IsCancelled(ctx->status)) {
    GDR_LOG_EVERY_N_SEC(kWarning, 5) << "op failed: " << ctx->status;
  }
  OpAnswer answer{std::move(ctx->status), ns, std::nullopt, {}};
  if (answer.status.ok()) {
    answer.crc32c = ctx->crc32c;
    answer.data = std::move(ctx->inline_answer.bytes);
  }
  ctx->done_(std::move(answer));
}

void OpPipeline::Refuse(std::unique_ptr<OpContext> ctx, const absl::Status& why, bool log) const {
  for (OpStage* s : stages_) s->OnRefused(*ctx, why);
  if (log) LogRefusal(why);
}

void OpPipeline::RefuseUnstarted(absl::StatusCode code) const {
  OpContext ctx(this, Direction::kStoreToClient, nullptr, nullptr, false, false, {}, {},
                nullptr);
  const absl::Status why(code, "");
  for (OpStage* s : stages_) s->OnRefused(ctx, why);
}

OpTicket& OpTicket::operator=(OpTicket&& o) noexcept {
  if (this != &o) {
    Submitted(absl::CancelledError("op dropped before a transport took it"));
    ctx_ = std::exchange(o.ctx_, nullptr);
  }
  return *this;
}

OpTicket::~OpTicket() {
  if (ctx_ != nullptr) Submitted(absl::CancelledError("op dropped before a transport took it"));
}

void OpTicket::Submitted(const absl::Status& status) {
  OpContext* ctx = std::exchange(ctx_, nullptr);
  // Taken: the op may have completed already; it is the transport's to end.
  if (ctx == nullptr || status.ok()) return;
  ctx->pipeline_->Refuse(std::unique_ptr<OpContext>(ctx), status);
}

}  // namespace gdr
