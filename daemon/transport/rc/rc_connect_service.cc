#include "daemon/transport/rc/rc_connect_service.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_status.h"
#include "common/grpc/write_queue.h"

namespace gdr {

namespace v1 = gdrstore::v1;

namespace {

// One Connect call. Reads the hello, answers RcAccept, then relays RcResetQp / RcQpReady for
// the connection's lifetime. Writes go out one at a time through a WriteQueue. The connection
// is released in OnDone, whatever ended the call.
class ConnectReactor final
    : public grpc::ServerBidiReactor<v1::ConnectRequest, v1::ConnectResponse>,
      public RcControl {
 public:
  ConnectReactor(RcInitiator* owner, std::string peer)
      : owner_(owner),
        peer_(std::move(peer)),
        writes_(
            [this](std::deque<v1::ConnectResponse>& queue) {
              StartWrite(&queue.front());
              return size_t{1};
            },
            [this](bool) { Finish(ToGrpcStatus(final_)); }) {
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
    writes_.OnWriteDone(ok);  // a failed write discards the rest
    if (!ok) EndLocked(absl::UnavailableError("rc connection: the client stopped reading"));
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

  void SendResetQp(uint32_t index, uint32_t qp_number, uint32_t psn,
                   const std::string& reason) override {
    v1::ConnectResponse r;
    r.mutable_reset_qp()->set_index(index);
    r.mutable_reset_qp()->set_qp_number(qp_number);
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
          owner_->Accept(request_.hello(), peer_, this, resp.mutable_accept());
      if (!c.ok()) return c.status();
      conn_ = std::move(*c);
      Queue(std::move(resp));
      return absl::OkStatus();
    }
    if (!request_.has_qp_ready()) {
      return absl::InvalidArgumentError("after the hello, a Connect call carries only qp_ready");
    }
    return conn_->OnQpReady(request_.qp_ready().index(), request_.qp_ready().qp_number(),
                            request_.qp_ready().psn());
  }

  void Queue(v1::ConnectResponse msg) {
    absl::MutexLock lock(&mu_);
    writes_.Push(std::move(msg));  // dropped once the call is ending
  }

  void End(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    EndLocked(status);
  }

  // Drops what is unsent and finishes with `status` once the outstanding write (if any) is done.
  void EndLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writes_.ending()) return;
    final_ = status;
    writes_.Discard();
    writes_.EndWhenDrained();
  }

  RcInitiator* owner_;
  const std::string peer_;  // the call's address: the connection's ops must come from it
  v1::ConnectRequest request_;  // read callbacks never overlap
  std::shared_ptr<RcConnection> conn_;  // set by the first read, cleared in OnDone
  absl::Mutex mu_;
  absl::Status final_ ABSL_GUARDED_BY(mu_);  // set before writes_ can run its end
  WriteQueue<v1::ConnectResponse> writes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerBidiReactor<v1::ConnectRequest, v1::ConnectResponse>* RcConnectService::Open(
    grpc::CallbackServerContext* ctx) {
  return new ConnectReactor(rc_, ctx->peer());
}

}  // namespace gdr
