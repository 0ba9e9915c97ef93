#include "daemon/transport/rc/rc_initiator.h"

#include <deque>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/units.h"
#include "common/verbs/chunk_plan.h"
#include "common/verbs/verbs_status.h"

namespace gdr {

namespace v1 = gdrstore::v1;

// One Connect call. Reads the hello, answers RcAccept, then relays RcResetQp / RcQpReady for
// the connection's lifetime. Writes go out one at a time from a queue. The connection is
// released in OnDone, whatever ended the call.
class RcInitiator::ConnectReactor final
    : public grpc::ServerBidiReactor<v1::ConnectRequest, v1::ConnectResponse>,
      public RcControl {
 public:
  explicit ConnectReactor(RcInitiator* owner) : owner_(owner) {
    owner_->open_calls_.fetch_add(1);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      End(absl::OkStatus());
      return;
    }
    if (absl::Status s = Handle(); !s.ok()) {
      End(s);
      return;
    }
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!out_.empty()) out_.pop_front();
    if (!ok) {
      out_.clear();
      if (!finishing_) {
        finishing_ = true;
        final_ = absl::UnavailableError("rc connection: the client stopped reading");
      }
    }
    WriteNextLocked();
  }

  void OnCancel() override { End(absl::CancelledError("Connect call cancelled")); }

  void OnDone() override {
    if (conn_) {
      conn_->SetControl(nullptr);
      owner_->Release(conn_->id(),
                      absl::UnavailableError(absl::StrCat("rc connection ", conn_->id(),
                                                          " was closed by its Connect call")));
      conn_.reset();
    }
    owner_->open_calls_.fetch_sub(1);
    delete this;
  }

  void SendResetQp(uint32_t index, uint32_t psn, const std::string& reason) override {
    v1::ConnectResponse r;
    r.mutable_reset_qp()->set_index(index);
    r.mutable_reset_qp()->set_psn(psn);
    r.mutable_reset_qp()->set_reason(reason);
    Queue(std::move(r));
  }

  void Fail(const absl::Status& status) override { End(status); }

 private:
  absl::Status Handle() {
    if (!conn_) {
      if (!request_.has_hello()) {
        return absl::InvalidArgumentError("the first Connect message must be a hello");
      }
      v1::ConnectResponse resp;
      absl::StatusOr<std::shared_ptr<RcConnection>> c =
          owner_->Accept(request_.hello(), this, resp.mutable_accept());
      if (!c.ok()) return c.status();
      conn_ = std::move(*c);
      Queue(std::move(resp));
      return absl::OkStatus();
    }
    if (!request_.has_qp_ready()) {
      return absl::InvalidArgumentError("after the hello, a Connect call carries only qp_ready");
    }
    return conn_->OnQpReady(request_.qp_ready().index(), request_.qp_ready().psn());
  }

  void Queue(v1::ConnectResponse msg) {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    out_.push_back(std::move(msg));
    WriteNextLocked();
  }

  // Starts the next write, or Finish once finishing and nothing is left to write.
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!out_.empty() && !finishing_) {
      writing_ = true;
      StartWrite(&out_.front());
      return;
    }
    if (finishing_) {
      finished_ = true;
      Finish(ToGrpcStatus(final_));
    }
  }

  void End(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    if (finishing_) return;
    finishing_ = true;
    final_ = status;
    out_.clear();
    WriteNextLocked();
  }

  RcInitiator* owner_;
  v1::ConnectRequest request_;  // read callbacks never overlap
  std::shared_ptr<RcConnection> conn_;  // set by the first read, cleared in OnDone
  absl::Mutex mu_;
  std::deque<v1::ConnectResponse> out_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<RcInitiator>> RcInitiator::Create(
    const RcInitiatorOptions& options, const Store& store) {
  if (options.max_qps == 0 || options.max_qps_per_client == 0 || options.qp.sq_depth == 0) {
    return absl::InvalidArgumentError("rc QP limits and send queue depth must be > 0");
  }
  auto r = std::unique_ptr<RcInitiator>(new RcInitiator(options));
  absl::StatusOr<std::unique_ptr<verbs::VerbsDevice>> dev = verbs::VerbsDevice::Open(options.device);
  if (!dev.ok()) return dev.status();
  r->device_ = std::move(*dev);
  for (const auto& [name, volume] : store.volumes()) {
    absl::StatusOr<std::unique_ptr<verbs::MemoryRegion>> mr = verbs::MemoryRegion::Register(
        r->device_->pd(), volume->data(), volume->size(), IBV_ACCESS_LOCAL_WRITE);
    if (!mr.ok()) {
      return absl::Status(mr.status().code(),
                          absl::StrCat("registering volume ", name, ": ", mr.status().message()));
    }
    r->volume_mrs_.emplace(name, std::move(*mr));
  }
  absl::StatusOr<std::unique_ptr<verbs::CompletionPoller>> poller = verbs::CompletionPoller::Create(
      r->device_->context(), options.poller, r->device_->name());
  if (!poller.ok()) return poller.status();
  r->poller_ = std::move(*poller);
  r->chunk_bytes_ = verbs::EffectiveChunkBytes(options.chunk_bytes, r->device_->port().max_msg_size);
  {
    absl::MutexLock lock(&r->mu_);
    r->next_id_ = (std::random_device{}() | (uint64_t{std::random_device{}()} << 32)) | 1;
  }
  r->housekeeper_ = std::thread([raw = r.get()] { raw->Housekeeping(); });
  GDR_LOG(kInfo) << "rc: " << r->device_->Describe() << "; " << r->volume_mrs_.size()
                 << " volumes registered; chunks of " << FormatSize(r->chunk_bytes_)
                 << "; up to " << options.max_qps << " QPs (" << options.max_qps_per_client
                 << " per client); poller " << verbs::PollModeName(options.poller.mode);
  return r;
}

RcInitiator::~RcInitiator() {
  Shutdown();
  absl::MutexLock lock(&mu_);
  connections_.clear();
}

absl::Status RcInitiator::Submit(const TransferOp& op, OpDone done) {
  if (op.transport != TransportKind::kRc) {
    return absl::InternalError("rc initiator got an op of another transport");
  }
  auto mr = volume_mrs_.find(op.volume);
  if (mr == volume_mrs_.end()) {
    return absl::InternalError(absl::StrCat("volume ", op.volume, " is not registered"));
  }
  std::shared_ptr<RcConnection> conn;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::CancelledError("daemon is shutting down");
    auto it = connections_.find(op.rc_connection_id);
    if (it != connections_.end()) conn = it->second;
  }
  if (!conn) {
    return absl::FailedPreconditionError(
        absl::StrCat("rc connection ", op.rc_connection_id,
                     " is not open on this daemon (never connected, or its Connect call ended); "
                     "reconnect"));
  }
  return conn->Submit(op, mr->second->lkey(), std::move(done));
}

absl::StatusOr<std::shared_ptr<RcConnection>> RcInitiator::Accept(const v1::RcHello& hello,
                                                                  RcControl* control,
                                                                  v1::RcAccept* accept) {
  if (draining_.load()) return absl::UnavailableError("daemon is shutting down");
  if (absl::Status s = RcConnection::ValidateHello(hello); !s.ok()) return s;
  uint32_t n = 0;
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::UnavailableError("daemon is shutting down");
    n = std::min<uint32_t>({static_cast<uint32_t>(hello.qps_size()), options_.max_qps_per_client,
                            options_.max_qps - qps_in_use_});
    if (n == 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "all ", options_.max_qps, " rc QPs of this daemon are in use; retry later"));
    }
    qps_in_use_ += n;  // held while the QPs are created
    do {
      id = next_id_;
      next_id_ = next_id_ * 6364136223846793005ull + 1442695040888963407ull;
    } while (id == 0 || connections_.count(id));
  }
  RcConnectionConfig cfg;
  cfg.qp = options_.qp;
  cfg.chunk_bytes = chunk_bytes_;
  cfg.max_backlog = options_.max_backlog;
  absl::StatusOr<std::unique_ptr<RcConnection>> made =
      RcConnection::Create(id, device_.get(), poller_.get(), cfg, hello, n, accept);
  absl::MutexLock lock(&mu_);
  if (!made.ok()) {
    qps_in_use_ -= n;
    return made.status();
  }
  std::shared_ptr<RcConnection> conn = std::move(*made);
  conn->SetControl(control);
  connections_.emplace(id, conn);
  GDR_LOG(kInfo) << "rc connection " << id << ": " << n << " QPs (" << qps_in_use_
                 << " in use)";
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
  conn->Close(why, [this, id] {
    // Destroy on the poller thread, outside any completion of the connection.
    poller_->Post([this, id] {
      std::shared_ptr<RcConnection> dead;
      {
        absl::MutexLock lock(&mu_);
        auto it = connections_.find(id);
        if (it == connections_.end()) return;
        dead = std::move(it->second);
        connections_.erase(it);
        qps_in_use_ -= dead->qp_count();
        GDR_LOG(kInfo) << "rc connection " << id << " closed; " << qps_in_use_ << " QPs in use";
      }
    });
  });
}

void RcInitiator::StartDrain() { draining_.store(true); }

void RcInitiator::Housekeeping() {
  while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(250))) {
    std::vector<std::shared_ptr<RcConnection>> conns;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [id, c] : connections_) conns.push_back(c);
    }
    const absl::Time now = absl::Now();
    for (auto& c : conns) {
      if (c->ResetOverdue(now, options_.reset_timeout)) {
        absl::Status why = absl::DeadlineExceededError(absl::StrCat(
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
  if (!poller_) return;  // Create failed before the poller existed: nothing was connected
  {
    absl::MutexLock lock(&mu_);
    auto empty = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return connections_.empty(); };
    if (!mu_.AwaitWithTimeout(absl::Condition(&empty), absl::Seconds(10))) {
      GDR_LOG(kError) << "rc: " << connections_.size()
                      << " connections still had work requests outstanding at shutdown";
    }
  }
  poller_->Stop();
}

grpc::ServerBidiReactor<v1::ConnectRequest, v1::ConnectResponse>* RcInitiator::OpenConnection(
    grpc::CallbackServerContext* ctx) {
  return new ConnectReactor(this);
}

RcStats RcInitiator::stats() const {
  absl::MutexLock lock(&mu_);
  return RcStats{qps_in_use_, static_cast<uint32_t>(connections_.size())};
}

void RcInitiator::FillInfo(v1::RdmaInfo* info) const {
  const verbs::PortInfo& p = device_->port();
  info->set_device(device_->name());
  info->set_port(p.port);
  info->set_port_state(verbs::PortStateName(device_->QueryPortState()));
  info->set_link_layer(device_->is_roce() ? "Ethernet" : "InfiniBand");
  info->set_gid_index(static_cast<uint32_t>(p.gid_index));
  info->set_gid(std::string(reinterpret_cast<const char*>(p.gid.data()), 16));
  info->set_gid_address(verbs::DescribeGid(p.gid));
  info->set_gid_type(p.gid_type);
  info->set_lid(p.lid);
  info->set_mtu(verbs::MtuBytes(p.active_mtu));
  info->set_max_msg_bytes(p.max_msg_size);
  info->set_poll_mode(verbs::PollModeName(options_.poller.mode));
  RcStats s = stats();
  info->set_rc_qps(s.qps);
  info->set_rc_max_qps(options_.max_qps);
  info->set_rc_max_qps_per_client(options_.max_qps_per_client);
  info->set_rc_connections(s.connections);
}

absl::StatusOr<uint32_t> RcInitiator::VolumeLkey(const std::string& volume) const {
  auto it = volume_mrs_.find(volume);
  if (it == volume_mrs_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("volume '", volume, "' is not registered with ", device_->name()));
  }
  return it->second->lkey();
}

}  // namespace gdr
