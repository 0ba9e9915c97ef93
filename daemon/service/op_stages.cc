#include "daemon/service/op_stages.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/crc32c.h"
#include "daemon/store/mapping_guard.h"

namespace gdr {

namespace v1 = gdrstore::v1;

absl::StatusOr<std::vector<OpStage*>> InStageOrder(const std::vector<OpStage*>& stages) {
  std::vector<OpStage*> ordered;
  for (const char* name : kOpStageOrder) {
    for (OpStage* s : stages) {
      if (absl::string_view(name) != s->name()) continue;
      if (!ordered.empty() && absl::string_view(ordered.back()->name()) == name) {
        return absl::InvalidArgumentError(absl::StrCat("op stage '", name, "' given twice"));
      }
      ordered.push_back(s);
    }
  }
  // What is left out has a name the order does not know.
  for (OpStage* s : stages) {
    if (std::find(ordered.begin(), ordered.end(), s) == ordered.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("op stage '", s->name(), "' has no place in the pipeline's order"));
    }
  }
  return ordered;
}

absl::Status GrantStage::OnRequest(const OpRequest& request) {
  if (request.extent == nullptr) return absl::OkStatus();
  const Right right =
      request.direction == Direction::kStoreToClient ? Right::kGet : Right::kPut;
  return request.caller.Allows(request.extent->volume(), right);
}

bool CrcStage::OnTransferred(OpContext& ctx) {
  if (!ctx.crc || !ctx.status.ok() || ctx.volume == nullptr) return true;
  // The op's own volume, held until its answer, over the extent validation checked.
  const std::byte* bytes = ctx.volume->data() + ctx.offset;
  const uint64_t length = ctx.length;
  std::optional<uint32_t> crc;
  // Read as every copy out of a file volume is: a SIGBUS here fails no daemon.
  if (!RunGuarded([&crc, bytes, length] { crc = Crc32c(bytes, length); })) ctx.crc32c = crc;
  return true;
}

absl::Status AdmissionStage::OnStart(OpContext& ctx, TransferOp& op) {
  return part_->TryAcquire(ctx.length, &state(ctx));
}

void AdmissionStage::OnFinish(OpContext& ctx, uint64_t service_ns) { state(ctx).Release(); }

const Volume* SyncStage::VolumeToSync(const Volume* volume, Direction direction, bool sync) {
  if (!sync || direction != Direction::kClientToStore) return nullptr;
  return volume != nullptr && !volume->file().empty() ? volume : nullptr;
}

absl::Status SyncStage::OnStart(OpContext& ctx, TransferOp& op) {
  // The op holds its volume (op.store_volume) until it is answered, after the sync.
  state(ctx) = VolumeToSync(op.store_volume.get(), ctx.direction, ctx.sync);
  return absl::OkStatus();
}

bool SyncStage::OnTransferred(OpContext& ctx) {
  const Volume* volume = state(ctx);
  if (!ctx.status.ok() || volume == nullptr) return true;
  part_->Post([c = &ctx, volume] {
    c->status = volume->Sync(c->offset, c->length);
    c->Resume();
  });
  return false;
}

absl::Status FaultStage::OnStart(OpContext& ctx, TransferOp& op) {
  FaultDecision d = part_->Decide(absl::FromUnixNanos(ctx.start_ns), ctx.direction,
                                    op.transport, op.volume, op.offset, op.length,
                                    FaultClient{ctx.client, ctx.peer});
  if (!d.error.ok()) return d.error;
  op.inject = d.transport;
  if (d.stall != nullptr || d.corrupt.has_value()) {
    std::unique_ptr<OpFault>& fault = state(ctx);
    fault = std::make_unique<OpFault>();
    fault->stall = std::move(d.stall);
    fault->corrupt = d.corrupt;
    if (d.corrupt.has_value()) fault->op = op;
  }
  return absl::OkStatus();
}

bool FaultStage::OnTransferred(OpContext& ctx) {
  const std::unique_ptr<OpFault>& fault = state(ctx);
  if (fault == nullptr || !ctx.status.ok()) return true;
  if (fault->corrupt.has_value()) {
    // The byte goes out from the delay queue's thread: a transport's completion never submits
    // new work to the transports from inside itself.
    delays_->RunAt(absl::InfinitePast(), [this, c = &ctx] { DeliverCorruptByte(*c); });
    return false;
  }
  return Hold(ctx);
}

bool FaultStage::Hold(OpContext& ctx) {
  const std::unique_ptr<OpFault>& fault = state(ctx);
  if (!ctx.status.ok() || fault == nullptr || fault->stall == nullptr) return true;
  // Held while its stall rules stand (a rule cleared meanwhile lets it go at once). The local
  // reference keeps the hold alive through Arm even when the op is answered inside it (a
  // queue that has shut down runs the answer at once) and the op's own reference goes.
  std::shared_ptr<StallHold> stall = fault->stall;
  stall->Arm(delays_, absl::InfinitePast(), [c = &ctx] { c->Resume(); });
  return false;
}

void FaultStage::DeliverCorruptByte(OpContext& ctx) {
  OpFault& fault = *state(ctx);
  const uint64_t draw = *fault.corrupt;
  fault.corrupt.reset();
  const TransferOp& op = fault.op;
  auto delivered = [this](OpContext& c, absl::Status s) {
    c.status = std::move(s);
    if (Hold(c)) c.Resume();
  };
  const Volume& source = store_->fault_source();
  const uint64_t at = (draw >> 3) % op.length;
  // A read of the volume's mapping, guarded as every copy out of a file volume is.
  uint8_t stored = 0;
  if (std::optional<const void*> fault =
          RunGuarded([&stored, &op, at] { stored = static_cast<uint8_t>(op.local[at]); })) {
    delivered(ctx, MappingFaultStatus(*fault));
    return;
  }
  const auto flipped = static_cast<uint8_t>(stored ^ (1u << (draw & 7)));
  TransferOp one = op;
  one.volume = source.name();
  one.store_volume = store_->fault_source_held();
  one.offset = flipped;
  one.local = source.data() + flipped;  // the source holds every byte value at its own offset
  one.length = 1;
  one.remote_address = op.remote_address + at;
  one.inject = InjectedFault::kNone;
  absl::Status s = transports_->Submit(one, [delivered, c = &ctx](absl::Status st) {
    delivered(*c, st.ok() ? absl::OkStatus()
                          : absl::Status(st.code(), absl::StrCat("delivering an injected "
                                                                 "corrupt byte: ",
                                                                 st.message())));
  });
  if (!s.ok()) delivered(ctx, std::move(s));
}

void FaultStage::FillStats(const Caller& caller, const StatsPage& page,
                           v1::GetStatsResponse* out) const {
  part_->FillStats(out);
  // As for volumes: fault counts of volumes the caller may not see are left out, and those of
  // volumes outside the page's name range (after `after`, up to the page's last unless it is
  // the last page; those naming no volume come on the first page).
  const std::string& last = out->next_page_after();
  auto* faults = out->mutable_faults();
  faults->erase(std::remove_if(faults->begin(), faults->end(),
                               [&](const v1::FaultStats& f) {
                                 if (f.volume().empty()) return !page.after.empty();
                                 return !caller.MaySee(f.volume()) || f.volume() <= page.after ||
                                        (!last.empty() && f.volume() > last);
                               }),
                faults->end());
}

absl::Status MediaStage::OnStart(OpContext& ctx, TransferOp& op) {
  if (std::shared_ptr<MediaModel> m = part_->Find(op.volume)) {
    state(ctx).ready_at = m->Reserve(ctx.direction, op.length, absl::FromUnixNanos(ctx.start_ns));
  }
  return absl::OkStatus();
}

bool MediaStage::OnTransferred(OpContext& ctx) {
  const absl::Time ready_at = state(ctx).ready_at;
  if (!ctx.status.ok() || ready_at == absl::InfinitePast() || ready_at <= absl::Now()) {
    return true;
  }
  delays_->RunAt(ready_at, [c = &ctx] { c->Resume(); });
  return false;
}

namespace {

void FillMedia(const MediaModel& m, v1::MediaTiming* out) {
  const MediaSettings s = m.settings();
  out->set_latency_us(s.latency_us);
  out->set_bandwidth_bytes_per_sec(s.bandwidth);
  out->set_preset(s.preset);
  out->set_p99_us(s.p99_us);
  out->set_read_bandwidth_bytes_per_sec(s.read_bandwidth);
  out->set_write_bandwidth_bytes_per_sec(s.write_bandwidth);
  out->set_iops(s.iops);
  out->set_read_iops(s.read_iops);
  out->set_write_iops(s.write_iops);
  out->set_queue_depth(s.queue_depth);
  out->set_seed(s.seed);
  const MediaCounters c = m.counters(absl::Now());
  out->set_ops(c.ops);
  out->set_queued_ops(c.queued_ops);
  out->set_queue_wait_us(c.wait_ns / 1000);
  out->set_in_device(c.in_device);
}

}  // namespace

void MediaStage::FillStats(const Caller& caller, const StatsPage& page,
                           v1::GetStatsResponse* out) const {
  for (v1::VolumeStats& v : *out->mutable_volumes()) {
    if (std::shared_ptr<MediaModel> m = part_->Find(v.name())) FillMedia(*m, v.mutable_media());
  }
}

absl::Status StatsStage::OnStart(OpContext& ctx, TransferOp& op) {
  OpCounted& counted = state(ctx);
  counted.scopes = part_->Begin(op.transport, op.volume, ctx.client, op.length);
  counted.started = true;
  return absl::OkStatus();
}

void StatsStage::OnFinish(OpContext& ctx, uint64_t service_ns) {
  part_->Finished(state(ctx).scopes, ctx.direction, ctx.status.code(), ctx.length, service_ns,
                  true);
}

void StatsStage::OnRefused(OpContext& ctx, const absl::Status& why) {
  const OpCounted& counted = state(ctx);
  if (counted.started) {
    // Counted as started: closed as failed with the transport's reason.
    part_->Finished(counted.scopes, ctx.direction, why.code(), ctx.length, 0, true);
    return;
  }
  // Refused before it started: counted where the request pointed, as far as it did.
  part_->Refused(ctx.buffer ? TransportOfEndpoint(ctx.buffer->endpoint_case()) : std::nullopt,
                  ctx.extent ? absl::string_view(ctx.extent->volume()) : absl::string_view(),
                  ctx.client, ctx.direction, why.code());
}

void StatsStage::FillStats(const Caller& caller, const StatsPage& page,
                           v1::GetStatsResponse* out) const {
  // Per-volume figures only of the volumes the caller has a grant on (the totals, per
  // transport figures and admission stay daemon-wide), paged among those.
  part_->Fill(out, DaemonStats::VolumePage{
                        page.after, page.max_entries,
                        [&caller](absl::string_view name) { return caller.MaySee(name); }});
  // A caller with a credential sees its own client entry only: the others' labels and
  // traffic are theirs.
  if (!caller.label().empty()) {
    auto* clients = out->mutable_clients();
    clients->erase(std::remove_if(clients->begin(), clients->end(),
                                  [&caller](const v1::ClientStats& c) {
                                    return c.client() != caller.label();
                                  }),
                   clients->end());
  }
}

absl::Status TraceStage::OnStart(OpContext& ctx, TransferOp& op) {
  trace::OpEvent& e = state(ctx).emplace();
  e.start_unix_ns = ctx.start_ns;
  e.offset = op.offset;
  e.length = op.length;
  e.volume = op.volume;
  e.client = op.caller;
  e.transport = static_cast<uint8_t>(ToProto(op.transport));
  // The trace file keeps the wire's words: a get is RPC Write, a put RPC Read.
  e.kind = ctx.direction == Direction::kStoreToClient ? trace::OpKind::kGet : trace::OpKind::kPut;
  return absl::OkStatus();
}

void TraceStage::OnFinish(OpContext& ctx, uint64_t service_ns) {
  std::optional<trace::OpEvent>& e = state(ctx);
  if (!e.has_value()) return;
  e->code = static_cast<uint16_t>(ctx.status.code());
  e->latency_ns = service_ns;
  part_->Record(std::move(*e));
  e.reset();
}

void TraceStage::FillStats(const Caller& caller, const StatsPage& page,
                           v1::GetStatsResponse* out) const {
  const TraceRecorder::Stats t = part_->stats();
  v1::TraceStats* ts = out->mutable_trace();
  ts->set_records(t.records);
  ts->set_dropped(t.dropped);
  ts->set_bytes(t.bytes);
  ts->set_file(t.file);
}

}  // namespace gdr
