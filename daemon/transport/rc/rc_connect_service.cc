#include "daemon/transport/rc/rc_connect_service.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace gdr {

namespace v1 = gdrstore::v1;

namespace {

// One Connect call. Reads the hello, answers RcAccept, then relays RcResetQp / RcQpReady for
// the connection's lifetime. Writes go out one at a time from a queue. The connection is
// released in OnDone, whatever ended the call.
class ConnectReactor final
    : public grpc::ServerBidiReactor<v1::ConnectRequest, v1::ConnectResponse>,
      public RcControl {
 public:
  explicit ConnectReactor(RcInitiator* owner) : owner_(owner) { StartRead(&request_); }

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

}  // namespace

grpc::ServerBidiReactor<v1::ConnectRequest, v1::ConnectResponse>* RcConnectService::Open(
    grpc::CallbackServerContext* ctx) {
  return new ConnectReactor(rc_);
}

}  // namespace gdr
