#include "daemon/transport/rc/rc_connection.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_status.h"
#include "common/base/log.h"
#include "common/verbs/chunk_plan.h"
#include "common/verbs/verbs_status.h"
#include "common/base/status_macros.h"

namespace gdr {

namespace v1 = gdrstore::v1;
using verbs::RdmaOp;
using verbs::RdmaWr;

// One accepted op: finishes when its last chunk does, with the first chunk error.
struct RcConnection::Op {
  OpDone done;
  RdmaOp verb = RdmaOp::kWrite;
  std::byte* local = nullptr;
  uint32_t lkey = 0;
  uint64_t remote = 0;
  uint32_t rkey = 0;
  uint64_t length = 0;
  bool inject_qp_error = false;  // an injected fault: fail the QP its first chunk goes on
  std::atomic<uint32_t> remaining{0};
  absl::Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);

  // True when this was the last chunk.
  bool ChunkDone(const absl::Status& s) {
    if (!s.ok()) {
      absl::MutexLock lock(&mu);
      if (status.ok()) status = s;
    }
    return remaining.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
};

// One work request; wr_id points here while it is posted.
struct RcConnection::Chunk final : verbs::CompletionHandler {
  RcConnection* conn = nullptr;
  std::shared_ptr<Op> op;
  uint64_t offset = 0;
  uint32_t length = 0;
  int slot = -1;
  int flushes = 0;
  void OnCompletion(const ibv_wc& wc) override { conn->OnCompletion(this, wc); }
  std::string Describe() const {
    return absl::StrFormat("RDMA %s of %u bytes at remote 0x%x (rkey 0x%x)",
                           op->verb == RdmaOp::kWrite ? "WRITE" : "READ", length,
                           op->remote + offset, op->rkey);
  }
};

RcConnection::RcConnection(uint64_t id, VerbsCore* rail, RcConnectionConfig config)
    : id_(id),
      rail_(rail),
      device_(&rail->device()),
      poller_(rail->poller()),
      config_(std::move(config)) {}

absl::Status RcConnection::ValidateHello(const v1::RcHello& hello) {
  if (hello.gid().size() != 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello.gid must be 16 bytes, not ", hello.gid().size()));
  }
  if (hello.lid() > 0xffff) return absl::InvalidArgumentError("hello.lid is above 0xFFFF");
  ibv_mtu mtu;
  if (absl::Status s = verbs::MtuFromBytes(hello.mtu(), &mtu); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("hello.mtu: ", s.message()));
  }
  if (hello.max_rd_atomic() < 1 || hello.max_rd_atomic() > 255) {
    return absl::InvalidArgumentError("hello.max_rd_atomic must be 1..255");
  }
  if (hello.qps_size() < 1 || hello.qps_size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello.qps must list 1..64 QPs, not ", hello.qps_size()));
  }
  for (int i = 0; i < hello.qps_size(); ++i) {
    const v1::RcQp& q = hello.qps(i);
    if (!verbs::IsQpNumber(q.qp_number())) {
      return absl::InvalidArgumentError(absl::StrCat("hello.qps[", i, "].qp_number ",
                                                     q.qp_number(), " is not in 1..0xFFFFFF"));
    }
    if (q.psn() > 0xffffff) {
      return absl::InvalidArgumentError(absl::StrCat("hello.qps[", i, "].psn is above 24 bits"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RcConnection>> RcConnection::Create(
    uint64_t id, VerbsCore* rail, const RcConnectionConfig& config, const v1::RcHello& hello,
    uint32_t n_qps, v1::RcAccept* accept) {
  GDR_RETURN_IF_ERROR(ValidateHello(hello));
  n_qps = std::min<uint32_t>(n_qps, static_cast<uint32_t>(hello.qps_size()));
  auto conn = std::unique_ptr<RcConnection>(new RcConnection(id, rail, config));
  const verbs::VerbsDevice* device = conn->device_;
  verbs::CompletionPoller* poller = conn->poller_;
  verbs::RcPeer remote;
  std::memcpy(remote.gid.data(), hello.gid().data(), 16);
  remote.lid = static_cast<uint16_t>(hello.lid());
  (void)verbs::MtuFromBytes(hello.mtu(), &remote.mtu);
  remote.rd_atomic = static_cast<uint8_t>(hello.max_rd_atomic());
  absl::MutexLock lock(&conn->mu_);
  for (uint32_t i = 0; i < n_qps; ++i) {
    absl::StatusOr<std::unique_ptr<verbs::QueuePair>> qp =
        verbs::CreateRcQp(*device, poller->cq(), config.qp);
    if (!qp.ok()) return qp.status();
    Slot slot;
    slot.qp = std::move(*qp);
    slot.local_psn = verbs::RandomPsn();
    slot.remote = remote;
    slot.remote.qp_num = hello.qps(static_cast<int>(i)).qp_number();
    slot.remote.psn = hello.qps(static_cast<int>(i)).psn();
    if (absl::Status s = slot.qp->BringUp(
            verbs::RcTransitions(*device, config.qp, slot.local_psn, slot.remote));
        !s.ok()) {
      return s;
    }
    v1::RcQp* out = accept->add_qps();
    out->set_qp_number(slot.qp->qp_num());
    out->set_psn(slot.local_psn);
    conn->slots_.push_back(std::move(slot));
  }
  const verbs::PortInfo& port = device->port();
  accept->set_connection_id(id);
  accept->set_gid(std::string(reinterpret_cast<const char*>(port.gid.data()), 16));
  accept->set_lid(port.lid);
  accept->set_mtu(verbs::MtuBytes(port.active_mtu));
  accept->set_max_rd_atomic(std::max<int>(
      1, std::min<int>(config.qp.max_dest_rd_atomic, device->attr().max_qp_rd_atom)));
  // The rail's name first: a client matches it against GetInfo rails[].device.
  accept->set_device(absl::StrCat(device->name(), " port ", port.port));
  // The client's QPs answer (READ responses, ACKs) with the class our requests carry.
  accept->set_traffic_class(config.qp.traffic_class);
  accept->set_service_level(config.qp.service_level);
  return conn;
}

RcConnection::~RcConnection() {
  absl::MutexLock lock(&mu_);
  if (posted_ != 0) {
    GDR_LOG(kError) << "rc connection " << id_ << " destroyed with " << posted_
                    << " work requests outstanding";
  }
}

void RcConnection::SetControl(RcControl* control) {
  absl::MutexLock lock(&mu_);
  control_ = control;
}

void RcConnection::FailControl(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (control_) control_->Fail(status);
}

uint64_t RcConnection::ops_in_flight() const { return ops_in_flight_.load(); }

absl::Status RcConnection::Submit(const TransferOp& op, uint32_t lkey, OpDone done) {
  if (!rail_->serving()) {
    rail_->CountRefused();
    return rail_->NotServing();
  }
  const std::vector<verbs::Chunk> plan = verbs::PlanChunks(op.length, config_.chunk_bytes);
  if (plan.empty()) return absl::InvalidArgumentError("op has no bytes");
  auto o = std::make_shared<Op>();
  o->done = [this, bytes = op.length, done = std::move(done)](absl::Status s) {
    ops_in_flight_.fetch_sub(1);
    done(rail_->FinishOp(bytes, std::move(s)));
  };
  o->verb = op.direction == Direction::kStoreToClient ? RdmaOp::kWrite : RdmaOp::kRead;
  o->local = op.local;
  o->lkey = lkey;
  o->remote = op.remote_address;
  o->rkey = op.rkey;
  o->length = op.length;
  // An injected path fault: an rc op's path is its QPs; the first chunk's goes to ERR.
  o->inject_qp_error = op.inject == InjectedFault::kBreakPath;
  o->remaining = static_cast<uint32_t>(plan.size());
  Finished fin;
  {
    absl::MutexLock lock(&mu_);
    if (closing_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rc connection ", id_, " is closing (", close_status_.message(), "); reconnect"));
    }
    if (backlog_.size() + plan.size() > config_.max_backlog) {
      return NotAdmittedError(
          absl::StrCat("rc connection ", id_, " has ", backlog_.size(),
                       " chunks waiting for its send queues; retry later"));
    }
    for (const verbs::Chunk& c : plan) {
      auto chunk = std::make_unique<Chunk>();
      chunk->conn = this;
      chunk->op = o;
      chunk->offset = c.offset;
      chunk->length = c.length;
      backlog_.push_back(std::move(chunk));
    }
    ops_in_flight_.fetch_add(1);
    PumpLocked(&fin);
  }
  Finish(&fin);
  return absl::OkStatus();
}

void RcConnection::Finish(Finished* fin) {
  for (auto& [op, status] : *fin) {
    if (!op->ChunkDone(status)) continue;
    absl::Status final_status;
    {
      absl::MutexLock lock(&op->mu);
      final_status = op->status;
    }
    op->done(std::move(final_status));
  }
  fin->clear();
}

void RcConnection::PumpLocked(Finished* fin) {
  if (closing_ || slots_.empty()) return;
  if (!rail_->serving()) {
    // Posted now, a chunk fails on the dead link and is flushed back here; queued, it waits for
    // a port that may not come back. Either way the op belongs on another rail.
    const absl::Status down = rail_->NotServing("queued for its send queue");
    for (auto& c : backlog_) fin->emplace_back(c->op, down);
    backlog_.clear();
    return;
  }
  const size_t n = slots_.size();
  bool progress = true;
  while (progress && !backlog_.empty()) {
    progress = false;
    size_t ready = 0;
    for (const Slot& s : slots_) ready += s.state == SlotState::kReady;
    if (ready == 0) return;
    // Each ready QP takes an even share per round so that one op spreads over all of them.
    const size_t share = (backlog_.size() + ready - 1) / ready;
    for (size_t k = 0; k < n && !backlog_.empty(); ++k) {
      const size_t index = (next_slot_ + k) % n;
      Slot& s = slots_[index];
      if (s.state != SlotState::kReady) continue;
      uint32_t take = static_cast<uint32_t>(std::min<size_t>(
          {share, backlog_.size(), s.qp->sq_depth() - s.qp->outstanding()}));
      while (take > 0 && !poller_->TryReserve(take)) take /= 2;
      if (take == 0) continue;
      if (!s.qp->TryReserve(take)) {
        poller_->Release(take);
        continue;
      }
      std::vector<RdmaWr> wrs(take);
      std::vector<Chunk*> chunks(take);
      for (uint32_t i = 0; i < take; ++i) {
        Chunk* c = backlog_.front().release();
        backlog_.pop_front();
        c->slot = static_cast<int>(index);
        chunks[i] = c;
        RdmaWr& w = wrs[i];
        w.wr_id = reinterpret_cast<uint64_t>(static_cast<verbs::CompletionHandler*>(c));
        w.op = c->op->verb;
        w.remote_addr = c->op->remote + c->offset;
        w.rkey = c->op->rkey;
        w.local_addr = reinterpret_cast<uint64_t>(c->op->local) + c->offset;
        w.lkey = c->op->lkey;
        w.length = c->length;
      }
      absl::Status posted = s.qp->Post(wrs);
      if (!posted.ok()) {
        s.qp->Release(take);
        poller_->Release(take);
        for (Chunk* c : chunks) {
          fin->emplace_back(c->op, posted);
          delete c;
        }
        MarkFailedLocked(static_cast<uint32_t>(index), std::string(posted.message()));
        continue;
      }
      posted_ += take;
      progress = true;
      for (Chunk* c : chunks) {
        if (!c->op->inject_qp_error) continue;
        c->op->inject_qp_error = false;
        InjectQpErrorLocked(static_cast<uint32_t>(index));
        break;
      }
    }
    next_slot_ = (next_slot_ + 1) % n;
  }
}

void RcConnection::OnCompletion(Chunk* raw, const ibv_wc& wc) {
  std::unique_ptr<Chunk> chunk(raw);
  Finished fin;
  std::function<void()> closed;
  {
    absl::MutexLock lock(&mu_);
    const auto index = static_cast<uint32_t>(chunk->slot);
    Slot& s = slots_[index];
    s.qp->Release(1);
    poller_->Release(1);
    --posted_;
    if (wc.status == IBV_WC_SUCCESS) {
      fin.emplace_back(chunk->op, absl::OkStatus());
    } else if (wc.status == IBV_WC_WR_FLUSH_ERR && !closing_ &&
               chunk->flushes < config_.max_flush_retries && rail_->serving()) {
      // Flushed because an earlier WR on this QP failed: not this op's fault; run it again
      // once a QP is ready. Not while the rail is down: no QP of it may be ready again before
      // the client gives up, so the op fails UNAVAILABLE and the client moves it.
      ++chunk->flushes;
      chunk->slot = -1;
      backlog_.push_front(std::move(chunk));
      MarkFailedLocked(index, "flushed after an earlier error");
    } else {
      absl::Status st = closing_ && wc.status == IBV_WC_WR_FLUSH_ERR
                            ? close_status_
                            : verbs::WcStatusToStatus(wc.status, wc.vendor_err, chunk->Describe());
      if (wc.status != IBV_WC_WR_FLUSH_ERR) {
        GDR_LOG_EVERY_N_SEC(kWarning, 1) << "rc connection " << id_ << " QP "
                                         << s.qp->qp_num() << ": " << st.message();
      }
      fin.emplace_back(chunk->op, std::move(st));
      if (!closing_) MarkFailedLocked(index, verbs::WcStatusName(wc.status));
    }
    MaybeResetLocked(index);
    PumpLocked(&fin);
    closed = TakeClosedLocked();
  }
  Finish(&fin);
  if (closed) closed();
}

void RcConnection::InjectQpErrorLocked(uint32_t index) {
  Slot& s = slots_[index];
  absl::Status st = s.qp->MoveToError();
  GDR_LOG(kWarning) << "rc connection " << id_ << " QP " << s.qp->qp_num()
                    << ": moved to the error state by an injected fault"
                    << (st.ok() ? std::string() : absl::StrCat(" (failed: ", st.message(), ")"));
  // Its posted work requests flush and run again elsewhere; when none is left (or they had
  // completed already) the QP is reset and the client asked to reconnect it.
  MarkFailedLocked(index, "moved to the error state by an injected fault");
  MaybeResetLocked(index);
}

void RcConnection::MarkFailedLocked(uint32_t index, const std::string& reason) {
  Slot& s = slots_[index];
  if (s.state != SlotState::kReady) return;
  s.state = SlotState::kDraining;
  s.reason = reason;
  if (!closing_) qp_errors_.fetch_add(1, std::memory_order_relaxed);
}

// A failed QP whose last WR has completed goes RESET -> INIT with a fresh PSN, and the client is
// asked to reset its side.
void RcConnection::MaybeResetLocked(uint32_t index) {
  Slot& s = slots_[index];
  if (s.state != SlotState::kDraining || s.qp->outstanding() != 0 || closing_) return;
  // A new QP, not the failed one reset: packets of the failed pair still in the network carry
  // its QP numbers and reach nothing, where a reset QP with the same number would take a stale
  // ACK whose PSN looks ahead as completing a new WRITE that never arrived (seen on SoftRoCE: a
  // WRITE reported done with 66 KiB of its 1 MiB placed). The failed QP has no WR outstanding,
  // so it goes now.
  s.local_psn = verbs::RandomPsn();
  auto steps = verbs::RcTransitions(*device_, config_.qp, s.local_psn, s.remote);
  absl::StatusOr<std::unique_ptr<verbs::QueuePair>> fresh =
      verbs::CreateRcQp(*device_, poller_->cq(), config_.qp);
  absl::Status st = fresh.ok() ? (*fresh)->BringUp(std::span(steps.data(), 1)) : fresh.status();
  if (!st.ok()) {
    GDR_LOG(kError) << "rc connection " << id_ << " QP " << s.qp->qp_num()
                    << " cannot be replaced: " << st.message();
    s.state = SlotState::kDead;
    bool any_alive = false;
    for (const Slot& o : slots_) any_alive |= o.state != SlotState::kDead;
    if (!any_alive && control_) {
      control_->Fail(absl::UnavailableError(
          absl::StrCat("every QP of rc connection ", id_, " failed: ", st.message())));
    }
    return;
  }
  const uint32_t failed = s.qp->qp_num();
  s.qp = std::move(*fresh);
  s.state = SlotState::kResetting;
  s.reset_since = absl::Now();
  GDR_LOG(kInfo) << "rc connection " << id_ << " QP " << failed << " replaced by QP "
                 << s.qp->qp_num() << " after " << s.reason << "; waiting for the client";
  if (control_) control_->SendResetQp(index, s.qp->qp_num(), s.local_psn, s.reason);
}

absl::Status RcConnection::OnQpReady(uint32_t index, uint32_t qp_number, uint32_t psn) {
  Finished fin;
  {
    absl::MutexLock lock(&mu_);
    if (index >= slots_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("qp_ready.index ", index,
                                                     " is not below ", slots_.size()));
    }
    if (psn > 0xffffff) return absl::InvalidArgumentError("qp_ready.psn is above 24 bits");
    if (!verbs::IsQpNumber(qp_number)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "qp_ready.qp_number ", qp_number, " is not in 1..0xFFFFFF (the client's new QP)"));
    }
    Slot& s = slots_[index];
    if (s.state != SlotState::kResetting) {
      return absl::FailedPreconditionError(
          absl::StrCat("QP ", index, " of rc connection ", id_, " is not being reset"));
    }
    s.remote.psn = psn;
    s.remote.qp_num = qp_number;
    auto steps = verbs::RcTransitions(*device_, config_.qp, s.local_psn, s.remote);
    if (absl::Status st = s.qp->BringUp(std::span(steps.data() + 1, 2)); !st.ok()) {
      s.state = SlotState::kDead;
      return st;
    }
    s.state = SlotState::kReady;
    qp_recoveries_.fetch_add(1, std::memory_order_relaxed);
    GDR_LOG(kInfo) << "rc connection " << id_ << " QP " << s.qp->qp_num() << " recovered";
    PumpLocked(&fin);
  }
  Finish(&fin);
  return absl::OkStatus();
}

std::function<void()> RcConnection::TakeClosedLocked() {
  if (!closing_ || posted_ != 0 || !on_closed_) return nullptr;
  return std::exchange(on_closed_, nullptr);
}

void RcConnection::Close(const absl::Status& why, std::function<void()> on_closed) {
  Finished fin;
  std::function<void()> closed;
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return;
    closing_ = true;
    close_status_ = why;
    on_closed_ = std::move(on_closed);
    for (auto& c : backlog_) fin.emplace_back(c->op, why);
    backlog_.clear();
    for (Slot& s : slots_) {
      if (s.qp->outstanding() == 0) continue;
      if (absl::Status st = s.qp->MoveToError(); !st.ok()) {
        GDR_LOG(kError) << "rc connection " << id_ << ": " << st.message();
      }
    }
    closed = TakeClosedLocked();
  }
  Finish(&fin);
  if (closed) closed();
}

void RcConnection::FailQueuedIfRailDown() {
  if (rail_->serving()) return;
  Finished fin;
  {
    absl::MutexLock lock(&mu_);
    PumpLocked(&fin);
  }
  Finish(&fin);
}

bool RcConnection::ResetOverdue(absl::Time now, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const bool rail_serving = rail_->serving();
  for (Slot& s : slots_) {
    if (s.state != SlotState::kResetting) continue;
    // While the rail's port is down the client cannot reconnect either (the daemon's address
    // does not resolve): its time starts when the rail serves again.
    if (!rail_serving) {
      s.reset_since = now;
    } else if (now - s.reset_since > timeout) {
      return true;
    }
  }
  return false;
}

std::string RcConnection::Summary() const {
  absl::MutexLock lock(&mu_);
  int counts[4] = {0, 0, 0, 0};
  for (const Slot& s : slots_) ++counts[static_cast<int>(s.state)];
  return absl::StrCat(counts[0], " ready, ", counts[1], " draining, ", counts[2], " resetting, ",
                      counts[3], " dead, ", backlog_.size(), " chunks queued");
}

}  // namespace gdr
