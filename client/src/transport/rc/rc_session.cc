#include "client/src/transport/rc/rc_session.h"

#include <grpcpp/grpcpp.h>

#include <cstring>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/src/transport/op_path.h"
#include "client/src/transport/verbs_registration.h"
#include "common/grpc/grpc_status.h"
#include "common/base/log.h"
#include "common/verbs/verbs_status.h"
#include "common/grpc/write_queue.h"
#include "common/base/status_macros.h"

namespace gdr {

namespace v1 = gdrstore::v1;

// The client half of one Connect call: sends the hello, waits for the accept, then answers
// every RcResetQp with an RcQpReady. Writes are queued, one in flight (a WriteQueue under mu_).
class RcSession::Reactor final
    : public grpc::ClientBidiReactor<v1::ConnectRequest, v1::ConnectResponse> {
 public:
  Reactor(RcSession* session, v1::GdrStore::Stub* stub, v1::ConnectRequest hello)
      : session_(session),
        writes_(
            [this](std::deque<v1::ConnectRequest>& queue) {
              StartWrite(&queue.front());
              return size_t{1};
            },
            [this](bool all_written) { EndWritesLocked(all_written); }) {
    stub->async()->Connect(&ctx_, this);
    // Close starts WritesDone from the caller's thread: the hold keeps the call from finishing
    // under it until then, or until the read side has ended.
    AddHold();
    StartRead(&response_);
    Queue(std::move(hello));
    StartCall();
  }

  // Waits for the accept (or the call's end) until `deadline`.
  absl::StatusOr<v1::RcAccept> WaitAccept(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_until(lock, deadline, [this] { return have_accept_ || done_; })) {
      lock.unlock();
      ctx_.TryCancel();
      lock.lock();
      cv_.wait(lock, [this] { return done_; });
      return absl::DeadlineExceededError("the daemon did not answer the rc Connect in time");
    }
    if (have_accept_) return accept_;
    return status_.ok() ? absl::UnavailableError("Connect ended without an accept") : status_;
  }

  void Close() {
    std::unique_lock<std::mutex> lock(mu_);
    closing_ = true;
    reset_cv_.notify_all();
    writes_.EndWhenDrained();
    if (!cv_.wait_for(lock, std::chrono::seconds(10), [this] { return done_; })) {
      lock.unlock();
      ctx_.TryCancel();
      lock.lock();
      cv_.wait(lock, [this] { return done_; });
    }
    lock.unlock();
    if (resetter_.joinable()) resetter_.join();
  }

  ~Reactor() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
      reset_cv_.notify_all();
    }
    if (resetter_.joinable()) resetter_.join();
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the call is over: let OnDone come
      std::lock_guard<std::mutex> lock(mu_);
      writes_.Discard();
      ReleaseHoldLocked();
      return;
    }
    if (response_.has_accept()) {
      std::lock_guard<std::mutex> lock(mu_);
      accept_ = response_.accept();
      have_accept_ = true;
      cv_.notify_all();
    } else if (response_.has_reset_qp()) {
      RequestReset(response_.reset_qp().index(), response_.reset_qp().qp_number(),
                   response_.reset_qp().psn());
    }
    StartRead(&response_);
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writes_.OnWriteDone(ok);
  }

  void OnWritesDoneDone(bool ok) override {}

  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = FromGrpcStatus(s);
    done_ = true;
    cv_.notify_all();
    reset_cv_.notify_all();
  }

  uint64_t resets() {
    std::lock_guard<std::mutex> lock(mu_);
    return resets_;
  }
  absl::Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_ ? status_ : absl::OkStatus();
  }

 private:
  // Resets run on their own thread (started by the first), never on gRPC's callback thread: a
  // reconnect can fail for as long as the port is down, and the daemon keeps the QP waiting
  // while its rail is down too. A newer request for the same QP replaces a pending one.
  void RequestReset(uint32_t index, uint32_t daemon_qp, uint32_t daemon_psn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closing_ || done_) return;
    pending_resets_[index] = {daemon_qp, daemon_psn};
    if (!resetter_.joinable()) resetter_ = std::thread([this] { RunResets(); });
    reset_cv_.notify_all();
  }

  void RunResets() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!closing_ && !done_) {
      if (pending_resets_.empty()) {
        reset_cv_.wait(lock);
        continue;
      }
      const auto [index, daemon] = *pending_resets_.begin();
      pending_resets_.erase(pending_resets_.begin());
      lock.unlock();
      absl::StatusOr<RcSession::NewQp> fresh = session_->ResetQp(index, daemon.qp, daemon.psn);
      if (fresh.ok()) {
        v1::ConnectRequest ready;
        ready.mutable_qp_ready()->set_index(index);
        ready.mutable_qp_ready()->set_qp_number(fresh->qp_number);
        ready.mutable_qp_ready()->set_psn(fresh->psn);
        Queue(std::move(ready));
      }
      lock.lock();
      if (fresh.ok()) {
        ++resets_;
        continue;
      }
      if (reset_error_.message() != fresh.status().message()) {  // once per new reason
        GDR_LOG(kWarning) << "rc connection " << session_->connection_id() << ": QP " << index
                          << " cannot be reconnected yet, trying again: "
                          << fresh.status().message();
      }
      reset_error_ = fresh.status();
      // An unknown index is the daemon's mistake, not the link's: no retry; the daemon times
      // the reset out and ends the connection.
      if (absl::IsInvalidArgument(fresh.status())) continue;
      pending_resets_.try_emplace(index, daemon);
      reset_cv_.wait_for(lock, kResetRetry, [this] { return closing_ || done_; });
    }
  }

  void Queue(v1::ConnectRequest msg) {
    std::lock_guard<std::mutex> lock(mu_);
    writes_.Push(std::move(msg));  // dropped once the call is over or WritesDone went out
  }
  void ReleaseHoldLocked() {
    if (hold_released_) return;
    hold_released_ = true;
    RemoveHold();
  }
  void EndWritesLocked(bool all_written) {
    // Not all written: a write failed or the read side ended, and the call is over already.
    if (!all_written) return;
    StartWritesDone();
    ReleaseHoldLocked();  // OnDone comes after the release
  }

  RcSession* session_;
  grpc::ClientContext ctx_;
  v1::ConnectResponse response_;
  std::mutex mu_;
  std::condition_variable cv_;
  WriteQueue<v1::ConnectRequest> writes_;  // ending once Close was called
  bool hold_released_ = false;  // after this, nothing may be started on the call
  bool have_accept_ = false, done_ = false;
  v1::RcAccept accept_;
  absl::Status status_;
  absl::Status reset_error_;
  uint64_t resets_ = 0;
  static constexpr std::chrono::milliseconds kResetRetry{250};
  bool closing_ = false;  // Close or the destructor: the resetter stops
  std::condition_variable reset_cv_;
  struct DaemonQp {
    uint32_t qp, psn;
  };
  std::map<uint32_t, DaemonQp> pending_resets_;  // QP index -> the daemon's new QP and PSN
  std::thread resetter_;
};

absl::StatusOr<std::shared_ptr<RcSession>> RcSession::Open(v1::GdrStore::Stub* stub,
                                                           const RcSessionOptions& options) {
  if (options.qps == 0 || options.qps > 64) {
    return absl::InvalidArgumentError("rc QPs per client must be 1..64");
  }
  absl::StatusOr<std::unique_ptr<verbs::VerbsDevice>> dev = verbs::VerbsDevice::Open(options.device);
  if (!dev.ok()) return dev.status();
  if (options.require_peer_subnet && (*dev)->is_roce() &&
      !options.device.peer_address.empty() && !(*dev)->port().on_peer_subnet) {
    return absl::FailedPreconditionError(absl::StrCat(
        (*dev)->name(), " has no address on the subnet of ", options.device.peer_address));
  }
  return Connect(stub, options, std::move(*dev));
}

absl::StatusOr<std::shared_ptr<ClientTransport>> RcSession::Attach(v1::GdrStore::Stub* stub) {
  absl::StatusOr<std::shared_ptr<RcSession>> s = Connect(stub, options_, device_);
  if (!s.ok()) {
    return absl::Status(s.status().code(), absl::StrCat("rc connect: ", s.status().message()));
  }
  return std::shared_ptr<ClientTransport>(std::move(*s));
}

absl::StatusOr<std::shared_ptr<RcSession>> RcSession::Connect(
    v1::GdrStore::Stub* stub, const RcSessionOptions& options,
    std::shared_ptr<verbs::VerbsDevice> device) {
  std::shared_ptr<RcSession> s(new RcSession());
  s->options_ = options;
  s->config_.sq_depth = 1;  // passive: never posts
  s->config_.remote_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  s->device_ = std::move(device);
  s->cq_.reset(ibv_create_cq(s->device_->context(), 16, nullptr, nullptr, 0));
  if (!s->cq_) return verbs::VerbsError(errno, "ibv_create_cq");

  v1::ConnectRequest hello;
  v1::RcHello* h = hello.mutable_hello();
  const verbs::PortInfo& port = s->device_->port();
  h->set_gid(std::string(reinterpret_cast<const char*>(port.gid.data()), 16));
  h->set_lid(port.lid);
  h->set_mtu(verbs::MtuBytes(port.active_mtu));
  h->set_rail(options.daemon_rail);
  std::vector<uint32_t> psns;
  for (uint32_t i = 0; i < options.qps; ++i) {
    absl::StatusOr<std::unique_ptr<verbs::QueuePair>> qp =
        verbs::CreateRcQp(*s->device_, s->cq_.get(), s->config_);
    if (!qp.ok()) return qp.status();
    const uint32_t psn = verbs::RandomPsn();
    verbs::RcPeer local = verbs::LocalRcPeer(*s->device_, **qp, psn, s->config_);
    if (i == 0) h->set_max_rd_atomic(local.rd_atomic);
    auto steps = verbs::RcTransitions(*s->device_, s->config_, psn, verbs::RcPeer{});
    GDR_RETURN_IF_ERROR((*qp)->Modify(steps[0], "INIT"));
    v1::RcQp* q = h->add_qps();
    q->set_qp_number((*qp)->qp_num());
    q->set_psn(psn);
    psns.push_back(psn);
    s->qps_.push_back(std::move(*qp));
  }
  s->reactor_ = std::make_unique<Reactor>(s.get(), stub, std::move(hello));
  absl::StatusOr<v1::RcAccept> accept =
      s->reactor_->WaitAccept(std::chrono::steady_clock::now() + options.connect_timeout);
  if (!accept.ok()) return accept.status();
  if (accept->qps_size() < 1 || accept->qps_size() > static_cast<int>(options.qps) ||
      accept->gid().size() != 16 || accept->connection_id() == 0) {
    return absl::InternalError("the daemon's RcAccept is malformed");
  }
  verbs::RcPeer daemon;
  std::memcpy(daemon.gid.data(), accept->gid().data(), 16);
  daemon.lid = static_cast<uint16_t>(accept->lid());
  GDR_RETURN_IF_ERROR(verbs::MtuFromBytes(accept->mtu(), &daemon.mtu));
  if (accept->traffic_class() > 255 || accept->service_level() > 15) {
    return absl::InternalError(absl::StrCat(
        "the daemon's RcAccept is malformed: traffic_class ", accept->traffic_class(),
        " (0..255), service_level ", accept->service_level(), " (0..15)"));
  }
  // Our QPs' responses (READ data, ACKs) travel in the class of the daemon's requests: a
  // daemon older than these fields sends 0, the default class, as before.
  s->config_.traffic_class = static_cast<uint8_t>(accept->traffic_class());
  s->config_.service_level = static_cast<uint8_t>(accept->service_level());
  daemon.rd_atomic = static_cast<uint8_t>(std::clamp<uint32_t>(accept->max_rd_atomic(), 1, 255));
  s->qps_.resize(static_cast<size_t>(accept->qps_size()));
  for (int i = 0; i < accept->qps_size(); ++i) {
    daemon.qp_num = accept->qps(i).qp_number();
    daemon.psn = accept->qps(i).psn();
    auto steps = verbs::RcTransitions(*s->device_, s->config_, psns[static_cast<size_t>(i)], daemon);
    if (absl::Status st = s->qps_[static_cast<size_t>(i)]->BringUp(std::span(steps.data() + 1, 2));
        !st.ok()) {
      return st;
    }
    s->daemon_qps_.push_back(daemon);
  }
  s->connection_id_ = accept->connection_id();
  s->daemon_device_ = accept->device();
  return s;
}

absl::StatusOr<RcSession::NewQp> RcSession::ResetQp(uint32_t index, uint32_t daemon_qp,
                                                    uint32_t daemon_psn) {
  // Called only from the reset thread, after Open has filled daemon_qps_.
  if (index >= qps_.size() || index >= daemon_qps_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("reset of unknown QP index ", index));
  }
  if (!verbs::IsQpNumber(daemon_qp)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reset of QP index ", index, " names daemon QP ", daemon_qp, ", not in 1..0xFFFFFF"));
  }
  verbs::RcPeer peer = daemon_qps_[index];
  peer.qp_num = daemon_qp;
  peer.psn = daemon_psn & 0xffffff;
  const uint32_t psn = verbs::RandomPsn();
  GDR_ASSIGN_OR_RETURN(std::unique_ptr<verbs::QueuePair> fresh,
                       verbs::CreateRcQp(*device_, cq_.get(), config_));
  GDR_RETURN_IF_ERROR(fresh->BringUp(verbs::RcTransitions(*device_, config_, psn, peer)));
  // The failed QP goes with its place: it is passive (no WR of ours), so nothing waits on it.
  qps_[index] = std::move(fresh);
  daemon_qps_[index] = peer;
  return NewQp{qps_[index]->qp_num(), psn};
}

RcSession::~RcSession() { Close(); }

void RcSession::Close() {
  if (reactor_) reactor_->Close();
}

uint64_t RcSession::resets() const { return reactor_ ? reactor_->resets() : 0; }

absl::Status RcSession::call_status() const {
  return reactor_ ? reactor_->status() : absl::OkStatus();
}

absl::StatusOr<std::function<void()>> RcSession::Register(const std::shared_ptr<Region>& region) {
  GDR_RETURN_IF_ERROR(RegisterOnDevice(*device_, shared_from_this(), *region));
  return std::function<void()>();
}

void RcSession::DescribeEndpoint(v1::RemoteBuffer* buffer) const {
  buffer->mutable_rc()->set_connection_id(connection_id_);
}

std::string RcSession::HopTo(const Region& region, int rail) const {
  return Hop("rc", device_->name(), region);
}

void RcSession::FillInfo(gdrstore::TransportInfo* info) const {
  info->kind = gdrstore::Transport::kRc;
  info->rdma = rdma_info();
  info->description = absl::StrCat("rc on ", info->rdma->device, " port ", info->rdma->port, " (",
                                   info->rdma->qps, " QPs, connection ",
                                   info->rdma->connection_id, ")");
}

gdrstore::RdmaLocalInfo RcSession::rdma_info() const {
  const verbs::VerbsDevice& d = *device_;
  gdrstore::RdmaLocalInfo i;
  i.device = d.name();
  i.port = d.port().port;
  i.port_state = verbs::PortStateName(d.QueryPortState());
  i.gid_index = d.port().gid_index;
  i.gid = verbs::DescribeGid(d.port().gid);
  i.mtu = verbs::MtuBytes(d.port().active_mtu);
  i.qps = qp_count();
  i.connection_id = connection_id_;
  i.daemon_device = daemon_device_;
  i.qp_resets = resets();
  return i;
}

}  // namespace gdr
