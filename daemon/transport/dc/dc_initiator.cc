#include "daemon/transport/dc/dc_initiator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/base/units.h"
#include "common/verbs/chunk_plan.h"
#include "common/verbs/verbs_status.h"

namespace gdr::dc {
namespace {

// The op's dc destination; Submit lets no op without one in.
const DcDestination& Dest(const TransferOp& op) { return *DestinationOf<DcDestination>(op); }

const char* OpName(Direction d) {
  return d == Direction::kStoreToClient ? "RDMA WRITE" : "RDMA READ";
}

// The deepest DCI send queue mlx5 can create on a device whose max_qp_wr is `max_qp_wr`.
// The provider sizes a send queue in 64-byte WQE basic blocks: roundup_pow_of_two(max_send_wr
// * WQE size) / 64 must not exceed max_qp_wr (else mlx5dv_create_qp fails with EINVAL). A DCI
// WQE (control 16 + datagram/address vector 48 + remote address 16 + one data segment 16 = 96
// bytes, rounded up to 128) takes two blocks, so the depth is the largest power of two not
// above max_qp_wr / 2.
uint32_t MaxDciSqDepth(uint32_t max_qp_wr) {
  const uint32_t half = max_qp_wr / 2;
  if (half == 0) return 0;
  return 1u << (31 - __builtin_clz(half));
}

// Errors after which the route to the destination may have changed: the next op re-resolves.
bool RouteSuspect(ibv_wc_status s) {
  return s == IBV_WC_RETRY_EXC_ERR || s == IBV_WC_RESP_TIMEOUT_ERR;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DcInitiator>> DcInitiator::Create(
    std::unique_ptr<DcDevice> device, const DcInitiatorOptions& options, LocalKeyFn local_key) {
  if (!device) return absl::InvalidArgumentError("no DC device");
  const DcCaps& caps = device->caps();
  if (!caps.mlx5) {
    return absl::FailedPreconditionError(absl::StrCat(
        "transport dc: ", caps.why_not.empty()
                              ? "the device is not mlx5 (mlx5dv_is_supported() is false); DC "
                                "needs a ConnectX-5 or later"
                              : caps.why_not));
  }
  if (!caps.dc) {
    return absl::FailedPreconditionError(absl::StrCat(
        "transport dc: the device cannot create DC initiators: ", caps.why_not));
  }
  if (options.dci_count == 0) return absl::InvalidArgumentError("--dci-count must be >= 1");
  // Leave the device room for the rc transport and the clients' QPs.
  const uint32_t max_dcis = std::max<uint32_t>(1, std::min<uint32_t>(caps.max_qp / 2, 4096));
  if (options.dci_count > max_dcis) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dci-count ", options.dci_count, " is above what this device allows (",
                     max_dcis, ": half its max_qp of ", caps.max_qp, ", at most 4096)"));
  }
  if (options.dci.sq_depth == 0) return absl::InvalidArgumentError("--dc-sq-depth must be >= 1");
  if (caps.max_qp_wr != 0 && options.dci.sq_depth > MaxDciSqDepth(caps.max_qp_wr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dc-sq-depth ", options.dci.sq_depth, " is above what a DCI of this device holds (",
        MaxDciSqDepth(caps.max_qp_wr), "): a DCI work request carries an address vector and "
        "takes two of the device's ", caps.max_qp_wr, " send-queue slots (max_qp_wr), so "
        "mlx5dv_create_qp would fail with EINVAL"));
  }
  Effective eff;
  eff.dci_count = options.dci_count;
  eff.sq_depth = options.dci.sq_depth;
  // A DCI's READ depth is bounded by the DC initiator limit where the device reports one
  // (kernels since 6.2 refuse RTR->RTS above it), and by RC's otherwise.
  uint8_t rd_cap = caps.max_qp_rd_atom;
  if (caps.max_dc_init_rd_atom != 0) {
    rd_cap = rd_cap != 0 ? std::min(rd_cap, caps.max_dc_init_rd_atom) : caps.max_dc_init_rd_atom;
  }
  eff.max_rd_atomic = std::max<uint8_t>(
      1, rd_cap ? std::min(options.dci.max_rd_atomic, rd_cap) : options.dci.max_rd_atomic);
  // The path MTU every client's DCT must match: --dc-mtu, never above the port's.
  if (options.mtu != 0 && caps.port_active_mtu != 0 && options.mtu > caps.port_active_mtu) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dc-mtu ", options.mtu, " is above the active MTU of ", caps.where, " (",
        caps.port_active_mtu, ")"));
  }
  eff.mtu = options.mtu != 0 ? options.mtu : caps.port_active_mtu;
  uint8_t log_streams = 0;
  if (options.use_streams && caps.max_log_num_concurent > 0) {
    log_streams = std::min(options.log_streams, caps.max_log_num_concurent);
    eff.log_errored = std::min({options.log_errored, caps.max_log_num_errored, log_streams});
  }
  eff.streams_per_dci = 1u << log_streams;
  eff.chunk_bytes = verbs::EffectiveChunkBytes(options.chunk_bytes, caps.port_max_msg_size);
  const uint64_t max_chunks = (options.max_op_bytes + eff.chunk_bytes - 1) / eff.chunk_bytes;
  const uint64_t pool_slots = static_cast<uint64_t>(eff.dci_count) * eff.sq_depth;
  if (max_chunks > pool_slots) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the largest op (", FormatSize(options.max_op_bytes), " in ", max_chunks, " chunks of ",
        FormatSize(eff.chunk_bytes), ") would not fit the DCI pool's ", pool_slots,
        " send-queue slots: raise --dci-count or --dc-sq-depth, or lower --max-op-bytes"));
  }
  DciSettings s = options.dci;
  s.sq_depth = eff.sq_depth;
  s.max_rd_atomic = eff.max_rd_atomic;
  s.mtu = eff.mtu;
  s.log_streams = log_streams;
  s.log_errored = eff.log_errored;
  for (uint32_t i = 0; i < eff.dci_count; ++i) {
    if (absl::Status st = device->CreateDci(i, s); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("DCI ", i, " of ", eff.dci_count, ": ",
                                                  st.message()));
    }
  }
  return std::unique_ptr<DcInitiator>(
      new DcInitiator(std::move(device), options, std::move(local_key), eff));
}

DcInitiator::DcInitiator(std::unique_ptr<DcDevice> device, const DcInitiatorOptions& options,
                         LocalKeyFn local_key, Effective eff)
    : device_(std::move(device)),
      options_(options),
      local_key_(std::move(local_key)),
      eff_(eff),
      where_(device_->caps().where.empty() ? "the device" : device_->caps().where),
      ah_cache_(std::make_unique<AhCache>(device_.get(), options.ah, options.ah_cache_size)),
      sched_(eff.dci_count, eff.sq_depth,
             static_cast<uint8_t>(__builtin_ctz(eff.streams_per_dci)), options.max_spread) {}

DcInitiator::~DcInitiator() { Shutdown(); }

std::string DcInitiator::Describe(const Work& w) const {
  return absl::StrCat(OpName(w.op->op.direction), " of ", w.length, " bytes to ",
                      DescribeDest(Dest(w.op->op).key), " (DCI ", w.dci,
                      eff_.streams_per_dci > 1 ? absl::StrCat(" stream ", w.stream) : "", ")");
}

DcWr DcInitiator::MakeWr(const Work& w) const {
  const Op& op = *w.op;
  DcWr wr;
  wr.handler = const_cast<Work*>(&w);
  wr.op = op.op.direction == Direction::kStoreToClient ? DcOpcode::kWrite : DcOpcode::kRead;
  wr.remote_addr = op.op.remote_address + w.offset;
  wr.rkey = op.op.rkey;
  wr.local_addr = reinterpret_cast<uint64_t>(op.op.local) + w.offset;
  wr.lkey = op.lkey;
  wr.length = w.length;
  wr.ah = op.ah.get();
  wr.dct_number = Dest(op.op).key.dct_number;
  wr.access_key = Dest(op.op).access_key;
  wr.stream = w.stream;
  return wr;
}

absl::Status DcInitiator::Submit(const TransferOp& top, OpDone done) {
  const DcDestination* dest = DestinationOf<DcDestination>(top);
  if (dest == nullptr) return absl::InternalError("dc initiator got an op of another transport");
  if (top.length == 0) return absl::InvalidArgumentError("op length is 0");
  if (dest->mtu != 0 && eff_.mtu != 0 && dest->mtu != eff_.mtu) {
    // A READ response's middle packets are exactly one path MTU: with two MTUs on the path the
    // DCI would drop the DCT's responses and retry until it gives up.
    return absl::FailedPreconditionError(absl::StrCat(
        "buffer.dc.mtu ", dest->mtu,
        " (the client's DCT path MTU) differs from this daemon's "
        "DCI path MTU ", eff_.mtu, ": start gdrstored with --dc-mtu N, N the smallest MTU of "
        "the fabric, so every client can match it"));
  }
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::CancelledError("the daemon is shutting down");
  }
  absl::StatusOr<uint32_t> lkey = local_key_(top);
  if (!lkey.ok()) return lkey.status();
  absl::StatusOr<std::shared_ptr<AddressHandle>> ah = ah_cache_->Get(dest->key.addr);
  if (!ah.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot build an address handle for ",
                                               DescribeDest(dest->key), ": ",
                                               ah.status().message()));
  }
  const std::vector<verbs::Chunk> chunks = verbs::PlanChunks(top.length, eff_.chunk_bytes);

  auto op = std::make_unique<Op>();
  op->owner = this;
  op->op = top;
  op->lkey = *lkey;
  op->ah = std::move(*ah);
  op->done = std::move(done);
  op->works.resize(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    op->works[i].op = op.get();
    op->works[i].offset = chunks[i].offset;
    op->works[i].length = chunks[i].length;
  }

  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::CancelledError("the daemon is shutting down");
  absl::StatusOr<std::vector<Assignment>> placed =
      sched_.Reserve(dest->key, static_cast<uint32_t>(chunks.size()));
  if (!placed.ok()) return placed.status();
  // Contiguous runs of chunks per DCI, one doorbell per DCI.
  size_t next = 0;
  for (const Assignment& a : *placed) {
    for (uint32_t k = 0; k < a.count; ++k) {
      Work& w = op->works[next + k];
      w.dci = a.dci;
      w.stream = a.stream;
      w.attempts = 1;
    }
    next += a.count;
  }
  next = 0;
  std::vector<DcWr> wrs;
  for (size_t ai = 0; ai < placed->size(); ++ai) {
    const Assignment& a = (*placed)[ai];
    wrs.clear();
    for (uint32_t k = 0; k < a.count; ++k) wrs.push_back(MakeWr(op->works[next + k]));
    absl::Status st = device_->Post(a.dci, wrs);
    if (!st.ok()) {
      // This run and every later one stay off the wire: give their slots back.
      for (size_t bi = ai; bi < placed->size(); ++bi) {
        const Assignment& b = (*placed)[bi];
        for (uint32_t k = 0; k < b.count; ++k) sched_.Release(dest->key, b.dci, b.stream);
      }
      if (op->pending == 0) return st;  // nothing posted: refused, `done` will not run
      Fail(op.get(), std::move(st));     // part posted: finishes, failed, when that completes
      break;
    }
    op->pending += a.count;
    next += a.count;
  }
  Op* raw = op.get();
  ops_.emplace(raw, std::move(op));
  return absl::OkStatus();
}

void DcInitiator::Work::OnCompletion(const ibv_wc& wc) {
  op->owner->OnWorkCompletion(this, wc.status, wc.vendor_err);
}

void DcInitiator::Fail(Op* op, absl::Status status) {
  if (op->status.ok()) op->status = std::move(status);
}

void DcInitiator::Settle(Op* op, Finished* finished) {
  if (--op->pending > 0) return;
  finished->emplace_back(std::move(op->done), op->status);
  ops_.erase(op);
}

void DcInitiator::OnWorkCompletion(Work* w, ibv_wc_status status, uint32_t vendor_err) {
  Finished finished;
  {
    absl::MutexLock lock(&mu_);
    device_->ReleaseCompletionSlots(1);
    Op* op = w->op;
    const DestKey& dest = Dest(op->op).key;
    const uint32_t dci = w->dci;
    const uint16_t stream = w->stream;
    sched_.Release(dest, dci, stream);
    if (status == IBV_WC_SUCCESS) {
      Settle(op, &finished);
    } else if (status == IBV_WC_WR_FLUSH_ERR) {
      // Flushed because its DCI (or stream) went to error under it, usually for another op's
      // fault: that op fails, this one is posted again elsewhere (bounded attempts).
      if (shutting_down_) {
        Fail(op, absl::CancelledError("the daemon is shutting down"));
        Settle(op, &finished);
      } else if (!op->status.ok()) {
        Settle(op, &finished);
      } else {
        if (sched_.state(dci) == DciScheduler::DciState::kReady &&
            !sched_.stream_in_error(dci, stream)) {
          // A flush with no error seen first: the DCI was moved to ERR behind our back.
          GDR_LOG_EVERY_N_SEC(kWarning, 5) << "dc: DCI " << dci << " flushed work without a "
                                           << "prior error completion; recovering it";
          sched_.MarkDciError(dci);
        }
        if (w->attempts < options_.max_attempts) {
          retry_.push_back(w);
        } else {
          Fail(op, verbs::WcStatusToStatus(status, vendor_err, Describe(*w)));
          Settle(op, &finished);
        }
      }
    } else {
      absl::Status st = verbs::WcStatusToStatus(status, vendor_err, Describe(*w));
      ++error_completions_;
      // A bad client can cause these at line rate: one warning a second, every one at debug.
      GDR_LOG(kDebug) << "dc: " << st.message();
      GDR_LOG_EVERY_N_SEC(kWarning, 1) << "dc: " << st.message();
      Fail(op, std::move(st));
      if (RouteSuspect(status)) ah_cache_->Invalidate(dest.addr);
      // Which scope is in error: with streams only the stream, unless the DCI itself went
      // to ERR (too many errored streams, or a QP-level error); ask the device.
      bool whole_dci = true;
      if (eff_.streams_per_dci > 1) {
        absl::StatusOr<bool> in_error = device_->DciInError(dci);
        whole_dci = !in_error.ok() || *in_error;
      }
      if (whole_dci) {
        sched_.MarkDciError(dci);
      } else {
        sched_.MarkStreamError(dci, stream);
      }
      Settle(op, &finished);
    }
    if (!shutting_down_) {
      MaybeRecover(dci, stream);
      DrainRetries(&finished);
    }
  }
  for (auto& [done, st] : finished) done(std::move(st));
}

void DcInitiator::MaybeRecover(uint32_t dci, uint16_t stream) {
  if (sched_.state(dci) == DciScheduler::DciState::kError) {
    if (sched_.outstanding(dci) != 0) return;  // wait for every flush
    if (absl::Status st = device_->RecoverDci(dci); st.ok()) {
      sched_.MarkDciReady(dci);
      ++dci_recoveries_;
      GDR_LOG(kInfo) << "dc: DCI " << dci << " recovered (RESET -> RTS), back in the pool";
    } else {
      sched_.MarkDciFailed(dci);
      GDR_LOG(kError) << "dc: DCI " << dci << " could not be recovered and leaves the pool ("
                      << sched_.ready_dcis() << " of " << sched_.dci_count()
                      << " ready): " << st.message();
    }
    return;
  }
  if (sched_.state(dci) == DciScheduler::DciState::kReady && sched_.stream_in_error(dci, stream) &&
      sched_.stream_outstanding(dci, stream) == 0) {
    if (absl::Status st = device_->ResetStream(dci, stream); st.ok()) {
      sched_.MarkStreamReady(dci, stream);
      ++stream_resets_;
      GDR_LOG(kInfo) << "dc: DCI " << dci << " stream " << stream << " reset";
    } else {
      GDR_LOG(kWarning) << "dc: DCI " << dci << " stream " << stream
                        << " reset failed, recovering the whole DCI: " << st.message();
      sched_.MarkDciError(dci);
      MaybeRecover(dci, stream);
    }
  }
}

void DcInitiator::DrainRetries(Finished* finished) {
  while (!retry_.empty()) {
    Work* w = retry_.front();
    Op* op = w->op;
    if (!op->status.ok()) {  // the op failed meanwhile: no point moving its bytes
      retry_.pop_front();
      Settle(op, finished);
      continue;
    }
    absl::StatusOr<std::vector<Assignment>> placed = sched_.Reserve(Dest(op->op).key, 1);
    if (!placed.ok()) {
      if (absl::IsResourceExhausted(placed.status())) return;  // next completion frees room
      // No DCI is ready. Those in error recover as soon as they drain, which needs no retry
      // of ours; only when none is left to recover do the retries fail.
      bool any_recoverable = false;
      for (uint32_t i = 0; i < sched_.dci_count(); ++i) {
        any_recoverable |= sched_.state(i) == DciScheduler::DciState::kError;
      }
      if (any_recoverable) return;
      retry_.pop_front();
      Fail(op, placed.status());
      Settle(op, finished);
      continue;
    }
    retry_.pop_front();
    const Assignment& a = placed->front();
    w->dci = a.dci;
    w->stream = a.stream;
    ++w->attempts;
    const DcWr wr = MakeWr(*w);
    if (absl::Status st = device_->Post(a.dci, {&wr, 1}); !st.ok()) {
      sched_.Release(Dest(op->op).key, a.dci, a.stream);
      Fail(op, std::move(st));
      Settle(op, finished);
      continue;
    }
    ++reposted_;
  }
}

void DcInitiator::Shutdown() {
  Finished finished;
  bool first = false;
  {
    absl::MutexLock lock(&mu_);
    first = !flushed_;
    shutting_down_ = true;
    flushed_ = true;
    while (!retry_.empty()) {
      Op* op = retry_.front()->op;
      retry_.pop_front();
      Fail(op, absl::CancelledError("the daemon is shutting down"));
      Settle(op, &finished);
    }
  }
  for (auto& [done, st] : finished) done(std::move(st));
  // Every posted WR now completes (most as flushes); the handlers finish their ops. A second
  // caller does not flush again but, like the first, returns only once the ops are gone, so
  // nobody stops the completion poller under work still on the wire.
  if (first) device_->FlushAll();
  absl::MutexLock lock(&mu_);
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ops_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&drained), options_.shutdown_wait)) {
    GDR_LOG(kError) << "dc: " << ops_.size() << " ops still had work requests on the wire "
                    << absl::FormatDuration(options_.shutdown_wait)
                    << " after the DCIs were flushed; their memory is leaked on purpose";
    for (auto& [raw, owned] : ops_) owned.release();
    ops_.clear();
  }
}

InitiatorStats DcInitiator::stats() const {
  InitiatorStats s;
  s.capacity = eff_.dci_count;
  absl::MutexLock lock(&mu_);
  s.in_use = sched_.ready_dcis();
  s.clients = static_cast<uint32_t>(sched_.destinations());
  s.in_flight = ops_.size();
  s.errors = error_completions_;
  s.recoveries = dci_recoveries_ + stream_resets_;
  return s;
}

DcInitiator::PoolDetail DcInitiator::pool_detail() const {
  absl::MutexLock lock(&mu_);
  PoolDetail d;
  d.outstanding_wrs = sched_.total_outstanding();
  d.dci_recoveries = dci_recoveries_;
  d.stream_resets = stream_resets_;
  d.reposted_wrs = reposted_;
  for (uint32_t i = 0; i < sched_.dci_count(); ++i) {
    d.failed_dcis += sched_.state(i) == DciScheduler::DciState::kFailed ? 1 : 0;
  }
  return d;
}

std::string DcInitiator::Describe() const {
  return absl::StrCat(eff_.dci_count, " DCIs on ", where_, ", send queue ", eff_.sq_depth,
                      ", max_rd_atomic ", eff_.max_rd_atomic, ", path MTU ", eff_.mtu,
                      eff_.streams_per_dci > 1
                          ? absl::StrCat(", ", eff_.streams_per_dci, " DCI streams each")
                          : ", no DCI streams");
}

void DcInitiator::FillInfo(gdrstore::v1::GetInfoResponse* info) const {
  gdrstore::v1::DcInfo* dc = info->mutable_rdma()->mutable_dc();
  dc->set_mtu(eff_.mtu);
  dc->set_traffic_class(options_.ah.traffic_class);
  dc->set_service_level(options_.ah.service_level);
  dc->set_hop_limit(options_.ah.hop_limit);
}

}  // namespace gdr::dc
