#include "daemon/transport/rc/rc_initiator.h"

#include <sys/random.h>

#include <cerrno>
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_peer.h"
#include "common/base/log.h"
#include "common/base/units.h"
#include "common/verbs/chunk_plan.h"
#include "common/verbs/verbs_status.h"
#include "common/base/status_macros.h"

namespace gdr {

namespace v1 = gdrstore::v1;

namespace {

// Connection ids are drawn from the kernel's CSPRNG, each on its own: a caller that sees its own
// id learns nothing about another client's (a sequence from one seed would give them all away).
absl::StatusOr<uint64_t> RandomConnectionId() {
  uint64_t id = 0;
  ssize_t got = 0;
  do {
    got = getrandom(&id, sizeof id, 0);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof id)) {
    return absl::ErrnoToStatus(errno, "getrandom for an rc connection id");
  }
  return id;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RcInitiator>> RcInitiator::Create(
    const RcInitiatorOptions& options, const RailSet* rails) {
  if (options.max_qps == 0 || options.max_qps_per_client == 0 || options.qp.sq_depth == 0) {
    return absl::InvalidArgumentError("rc QP limits and send queue depth must be > 0");
  }
  auto r = std::unique_ptr<RcInitiator>(new RcInitiator(options, rails));
  r->housekeeping_ns_.store(absl::GetCurrentTimeNanos());
  r->housekeeper_ = std::thread([raw = r.get()] { raw->Housekeeping(); });
  return r;
}

RcInitiator::~RcInitiator() {
  Shutdown();
  absl::MutexLock lock(&mu_);
  connections_.clear();
  owners_.clear();
}

absl::Status RcInitiator::Submit(const TransferOp& op, OpDone done) {
  const RcDestination* dest = DestinationOf<RcDestination>(op);
  if (dest == nullptr) return absl::InternalError("rc initiator got an op of another transport");
  std::shared_ptr<RcConnection> conn;
  std::string owner;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::CancelledError("daemon is shutting down");
    auto it = connections_.find(dest->connection_id);
    if (it != connections_.end()) {
      conn = it->second;
      owner = owners_[dest->connection_id];
    }
  }
  if (!conn) {
    return absl::FailedPreconditionError(
        absl::StrCat("rc connection ", dest->connection_id,
                     " is not open on this daemon (never connected, or its Connect call ended); "
                     "reconnect"));
  }
  // The port is not compared: a client may open its Connect call and its ops on different
  // channels. The id alone then reaches no other host's memory through the daemon.
  if (!SamePeerAddress(owner, op.caller)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "rc connection ", dest->connection_id, " belongs to another caller (opened from ", owner,
        ", this op comes from ", op.caller, "); ops must come from the Connect call's address"));
  }
  absl::StatusOr<uint32_t> lkey = conn->rail()->VolumeLkey(*op.store_volume);
  if (!lkey.ok()) return absl::InternalError(lkey.status().message());
  return conn->Submit(op, *lkey, std::move(done));
}

absl::StatusOr<std::shared_ptr<RcConnection>> RcInitiator::Accept(const v1::RcHello& hello,
                                                                  absl::string_view peer,
                                                                  RcControl* control,
                                                                  v1::RcAccept* accept) {
  if (draining_.load()) return absl::UnavailableError("daemon is shutting down");
  GDR_RETURN_IF_ERROR(RcConnection::ValidateHello(hello));
  absl::StatusOr<VerbsCore*> picked = rails_->Pick(hello.rail());
  if (!picked.ok()) {
    if (!absl::IsInvalidArgument(picked.status())) return picked.status();
    return absl::InvalidArgumentError(absl::StrCat("hello.rail: ", picked.status().message()));
  }
  VerbsCore* rail = *picked;
  const uint32_t r = rail->index();
  uint32_t n = 0;
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::UnavailableError("daemon is shutting down");
    n = std::min<uint32_t>({static_cast<uint32_t>(hello.qps_size()), options_.max_qps_per_client,
                            options_.max_qps - qps_in_use_[r]});
    if (n == 0) {
      return absl::ResourceExhaustedError(absl::StrCat("all ", options_.max_qps,
                                                       " rc QPs of rail ", rail->name(),
                                                       " are in use; retry later"));
    }
    qps_in_use_[r] += n;  // held while the QPs are created
    do {
      absl::StatusOr<uint64_t> drawn = RandomConnectionId();
      if (!drawn.ok()) {
        qps_in_use_[r] -= n;
        return drawn.status();
      }
      id = *drawn;
    } while (id == 0 || connections_.count(id));
  }
  RcConnectionConfig cfg;
  cfg.qp = options_.qp;
  cfg.chunk_bytes =
      verbs::EffectiveChunkBytes(options_.chunk_bytes, rail->device().port().max_msg_size);
  cfg.max_backlog = options_.max_backlog;
  absl::StatusOr<std::unique_ptr<RcConnection>> made =
      RcConnection::Create(id, rail, cfg, hello, n, accept);
  absl::MutexLock lock(&mu_);
  if (!made.ok()) {
    qps_in_use_[r] -= n;
    return made.status();
  }
  std::shared_ptr<RcConnection> conn = std::move(*made);
  conn->SetControl(control);
  connections_.emplace(id, conn);
  owners_.emplace(id, std::string(peer));
  GDR_LOG(kInfo) << "rc connection " << id << ": " << n << " QPs on rail " << rail->name()
                 << " (" << qps_in_use_[r] << " in use there)";
  return conn;
}

void RcInitiator::Release(uint64_t id, const absl::Status& why) {
  std::shared_ptr<RcConnection> conn;
  {
    absl::MutexLock lock(&mu_);
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    conn = it->second;
  }
  verbs::CompletionPoller* poller = conn->rail()->poller();
  conn->Close(why, [this, id, poller] {
    // Destroy on the rail's poller thread, outside any completion of the connection.
    poller->Post([this, id] {
      std::shared_ptr<RcConnection> dead;
      {
        absl::MutexLock lock(&mu_);
        auto it = connections_.find(id);
        if (it == connections_.end()) return;
        dead = std::move(it->second);
        connections_.erase(it);
        owners_.erase(id);
        qps_in_use_[dead->rail()->index()] -= dead->qp_count();
        closed_qp_errors_ += dead->qp_errors();
        closed_qp_recoveries_ += dead->qp_recoveries();
        GDR_LOG(kInfo) << "rc connection " << id << " on rail " << dead->rail()->name()
                       << " closed; " << QpsInUseLocked() << " QPs in use";
      }
    });
  });
}

void RcInitiator::StartDrain() { draining_.store(true); }

void RcInitiator::Housekeeping() {
  while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(250))) {
    housekeeping_ns_.store(absl::GetCurrentTimeNanos());
    std::vector<std::shared_ptr<RcConnection>> conns;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [id, c] : connections_) conns.push_back(c);
    }
    const absl::Time now = absl::Now();
    for (auto& c : conns) {
      c->FailQueuedIfRailDown();
      if (c->ResetOverdue(now, options_.reset_timeout)) {
        // UNAVAILABLE: the ops it fails may well succeed on another connection or rail.
        absl::Status why = absl::UnavailableError(absl::StrCat(
            "rc connection ", c->id(), ": the client did not reconnect a reset QP within ",
            absl::FormatDuration(options_.reset_timeout)));
        GDR_LOG(kWarning) << why.message();
        c->FailControl(why);
        Release(c->id(), why);
      } else if (draining_.load() && c->ops_in_flight() == 0) {
        c->FailControl(absl::UnavailableError("daemon is shutting down"));
      }
    }
  }
}

void RcInitiator::Shutdown() {
  std::vector<std::shared_ptr<RcConnection>> conns;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
    for (auto& [id, c] : connections_) conns.push_back(c);
  }
  draining_.store(true);
  stop_.Notify();
  if (housekeeper_.joinable()) housekeeper_.join();
  const absl::Status why = absl::CancelledError("daemon is shutting down");
  for (auto& c : conns) {
    c->FailControl(why);
    Release(c->id(), why);
  }
  conns.clear();
  {
    absl::MutexLock lock(&mu_);
    auto empty = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return connections_.empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&empty), absl::Seconds(10))) {
      GDR_LOG(kError) << "rc: " << connections_.size()
                      << " connections still had work requests outstanding at shutdown";
    }
  }
}

absl::Status RcInitiator::CheckHealth(absl::Duration max_stall) const {
  if (stop_.HasBeenNotified()) return absl::OkStatus();  // shut down: nothing left to watch
  const absl::Duration age =
      absl::Nanoseconds(absl::GetCurrentTimeNanos() - housekeeping_ns_.load());
  if (age > max_stall) {
    return absl::UnavailableError(absl::StrCat("rc housekeeping thread has not run for ",
                                               absl::FormatDuration(age)));
  }
  return absl::OkStatus();
}

uint32_t RcInitiator::QpsInUseLocked() const {
  uint32_t n = 0;
  for (uint32_t q : qps_in_use_) n += q;
  return n;
}

InitiatorStats RcInitiator::stats() const {
  InitiatorStats s;
  s.capacity = options_.max_qps * static_cast<uint32_t>(rails_->size());
  absl::MutexLock lock(&mu_);
  s.in_use = QpsInUseLocked();
  s.clients = static_cast<uint32_t>(connections_.size());
  s.errors = closed_qp_errors_;
  s.recoveries = closed_qp_recoveries_;
  for (const auto& [id, c] : connections_) {
    s.in_flight += c->ops_in_flight();
    s.errors += c->qp_errors();
    s.recoveries += c->qp_recoveries();
  }
  return s;
}

std::string RcInitiator::Describe() const {
  std::vector<std::string> rails;
  for (size_t i = 0; i < rails_->size(); ++i) rails.push_back(rails_->rail(i)->device().Describe());
  return absl::StrCat(rails_->size() == 1 ? "" : absl::StrCat(rails_->size(), " rails: "),
                      absl::StrJoin(rails, "; "), "; up to ", options_.max_qps, " QPs",
                      rails_->size() == 1 ? "" : " per rail", " (",
                      options_.max_qps_per_client, " per client), chunks of up to ",
                      FormatSize(options_.chunk_bytes));
}

void RcInitiator::FillInfo(v1::GetInfoResponse* info) const {
  const InitiatorStats s = stats();
  v1::RdmaInfo* rdma = info->mutable_rdma();
  rdma->set_rc_qps(s.in_use);
  rdma->set_rc_max_qps(s.capacity);
  rdma->set_rc_max_qps_per_client(options_.max_qps_per_client);
  rdma->set_rc_connections(s.clients);
}

}  // namespace gdr
