#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/admission_window.h"
#include "client/src/client_access.h"
#include "client/src/client_calls.h"
#include "client/src/deadline_timer.h"
#include "client/src/op_request.h"
#include "client/src/inline_answer.h"
#include "client/src/stream_messages.h"
#include "common/grpc/grpc_status.h"
#include "common/wire/stream_limits.h"
#include "common/grpc/write_queue.h"
#include "client/src/daemon_rpc.h"
#include "gdrstore/client.h"

namespace gdr {
namespace {

std::atomic<uint64_t> stream_messages{0};

// The Stream call whose answers this thread is handing out (OnReadDone), else null: an op
// submitted from an answer's callback goes on the call that answered, where it leaves in one
// message with the others that answer's callbacks submit (OpStream::Submit).
thread_local const void* delivering_call = nullptr;

}  // namespace

uint64_t StreamMessagesSoFar() { return stream_messages.load(std::memory_order_relaxed); }

}  // namespace gdr

namespace gdrstore {

// Client side of one Stream call (an OpStream has StreamOptions::calls of them). Submitted ops
// queue while a write is outstanding and go out together in the next StreamRequest; answers
// arrive batched too. Ops that answer callbacks submit while a response is being delivered also
// wait, and leave in one message once every answer of it has been handed out (with
// StreamOptions::max_ops_per_message, each complete group of that many leaves at once, and no
// message carries more). One write outstanding at a time (a WriteQueue under mu_);
// callbacks run outside the lock. Submit and Close start operations from the caller's thread,
// outside gRPC's reactions, which is only safe while the call cannot finish under them: a hold
// keeps it open until the client has sent its last message (Close) or the read side has ended (the
// daemon finished the call, e.g. refused it), and nothing is started after the hold is gone. Every
// op has a deadline: one not answered by then fails DEADLINE_EXCEEDED on the client's timer thread
// (and is dropped if it was not sent yet), so a hung daemon holds no caller past its timeout; Close
// then cancels the call instead of waiting for it.
//
// The stream may outlive its Client. Every use of the Client goes through a ClientCalls::Use,
// and the Client, as it goes, cancels the call, waits for the uses to end and takes back its
// timer (ClientCalls::Stream); later uses fail FAILED_PRECONDITION. Shared: the OpStream and,
// while it ends the call, the Client's list of calls hold it.
class OpStream::Reactor final
    : public grpc::ClientBidiReactor<v1::StreamRequest, v1::StreamResponse>,
      public gdr::ClientCalls::Stream {
 public:
  Reactor(Client* client, std::shared_ptr<gdr::ClientCalls> calls,
          std::shared_ptr<gdr::AdmissionWindow> window, std::shared_ptr<gdr::DeadlineTimer> timer,
          size_t batch)
      : client_(client),
        calls_(std::move(calls)),
        window_(std::move(window)),
        rpc_timeout_(client->rpc_timeout()),
        batch_(batch),
        writes_([this](std::deque<v1::StreamOp>& unsent) { return StartWriteLocked(unsent); },
                [this](bool all_written) { EndWritesLocked(all_written); }),
        timer_(std::move(timer)) {
    gdr::DaemonStub(*client_)->async()->Stream(&ctx_, this);
    AddHold();
    StartRead(&response_);
    StartCall();
  }

  // The timer is held (it may have lost its Client): a wake that is running is waited for.
  ~Reactor() override { CancelWakes(); }

  // Cancels every deadline wake and lets the timer go; Cancel waits for a wake that is running.
  void CancelWakes() {
    std::vector<gdr::DeadlineTimer::Id> timers;
    std::shared_ptr<gdr::DeadlineTimer> timer;
    {
      std::lock_guard<std::mutex> lock(mu_);
      timers.swap(timers_);
      timer = std::move(timer_);
    }
    if (timer != nullptr) {
      for (gdr::DeadlineTimer::Id id : timers) timer->Cancel(id);
    }
  }

  void CancelForClientClose() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      client_closed_ = true;
      if (done_) return;
    }
    ctx_.TryCancel();  // unlocked: OnDone takes mu_
  }

  void AwaitEndForClientClose() override {
    // No wake may run once the Client (and so, perhaps, the timer) is gone; ops still pending
    // are answered by OnDone, which the cancel brings.
    CancelWakes();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
  }

  // FAILED_PRECONDITION for an op that finds the Client gone.
  static absl::Status ClientGone() {
    return absl::FailedPreconditionError(
        "the stream's Client was closed: open a new Client and stream");
  }

  void Submit(OpKind kind, const Extent& extent, const Buffer& buffer, size_t buffer_offset,
              int rail, bool crc32c, absl::Time deadline, OpCallback done) {
    v1::StreamOp op;
    absl::Status s;
    {
      // May run on the window's thread after the Client has gone.
      gdr::ClientCalls::Use use(*calls_);
      s = !use ? ClientGone()
          : kind == OpKind::kWrite
              ? gdr::FillRequest(*client_, extent, buffer, buffer_offset, rail, crc32c,
                                 op.mutable_write())
              : gdr::FillRequest(*client_, extent, buffer, buffer_offset, rail, crc32c,
                                 op.mutable_read());
    }
    if (kind == OpKind::kReadSync) op.mutable_read()->set_sync(true);
    if (!s.ok()) {
      done(s);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writes_.ending() || ended_) {
        // An op after the call failed gets the call's error (e.g. the daemon refused the
        // stream); after a clean end or Close, FAILED_PRECONDITION.
        s = ended_ && !status_.ok()
                ? absl::Status(status_.code(), absl::StrCat("stream has ended: ", status_.message()))
                : absl::FailedPreconditionError(ended_ ? "stream has ended" : "stream is closed");
      } else {
        const uint64_t id = next_id_++;
        op.set_id(id);
        pending_.emplace(id, Pending{std::move(done), deadline});
        if (deadline < armed_at_) ArmLocked(deadline);
        // Submitted from an answer's callback: OnReadDone writes once all have run. (Not a
        // CompletionBatch: that would let another stream's burst run this one's flush, after
        // this stream may have been closed and destroyed.) Dropped once the call is over: the
        // op stays pending and OnDone answers it.
        if (delivering_ && delivering_thread_ == std::this_thread::get_id()) {
          writes_.Enqueue(std::move(op));
          // A whole group (StreamOptions::max_ops_per_message) leaves before the answer's
          // other callbacks.
          if (batch_ != 0 && writes_.queued() >= batch_) writes_.Flush();
        } else {
          writes_.Push(std::move(op));
        }
        return;
      }
    }
    done(s);
  }

  // Only inside a ClientCalls::Use of calls().
  Client* client() const { return client_; }
  gdr::ClientCalls& calls() const { return *calls_; }
  gdr::AdmissionWindow::Scope* scope() { return &scope_; }

  // Close in three steps, so that an OpStream's calls close side by side and the daemon gets
  // one rpc_timeout to end them all (OpStream::Close).
  // 1. Half-closes once every op waiting in the client's window for room is sent (or failed at
  //    its deadline; once the Client has gone, the window has failed them). Either way, the
  //    window no longer reaches this stream (its scope) after this.
  void BeginClose() {
    if (window_ != nullptr) window_->AwaitIdle(&scope_);
    std::lock_guard<std::mutex> lock(mu_);
    writes_.EndWhenDrained();
  }

  // 2. Every op is answered or past its deadline in bounded time.
  void AwaitAnswered() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_ || pending_.empty(); });
  }

  // 3. The daemon ends the call. One that has not by `end_by` (or after ops went unanswered:
  //    it is hung) has the call cancelled, which ends it at once. The call's final status.
  absl::Status EndBy(std::optional<std::chrono::steady_clock::time_point> end_by) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!done_) {
      bool ended = false;
      if (!expired_any_) {
        if (!end_by) {
          cv_.wait(lock, [this] { return done_; });
          ended = true;
        } else {
          ended = cv_.wait_until(lock, *end_by, [this] { return done_; });
        }
      }
      if (!ended) {
        ctx_.TryCancel();
        cv_.wait(lock, [this] { return done_; });
      }
    }
    return status_;
  }

  // When the daemon must have ended the calls once their ops are answered; none without an
  // rpc_timeout.
  std::optional<std::chrono::steady_clock::time_point> EndDeadline() const {
    if (rpc_timeout_.count() == 0) return std::nullopt;
    return std::chrono::steady_clock::now() + rpc_timeout_;
  }

  absl::Status Close() {
    BeginClose();
    AwaitAnswered();
    return EndBy(EndDeadline());
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writes_.OnWriteDone(ok);  // a failed write: the call is over, OnDone reports why
  }

  void OnWritesDoneDone(bool ok) override {}

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The call is over (the daemon finished it): let OnDone come.
      std::lock_guard<std::mutex> lock(mu_);
      writes_.Discard();
      ReleaseHoldLocked();
      return;
    }
    std::vector<std::pair<OpCallback, const v1::StreamResult*>> ready;
    ready.reserve(static_cast<size_t>(response_.results_size()));
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const v1::StreamResult& r : response_.results()) {
        // Not ours, or answered after its deadline failed it: ignore rather than misattribute.
        auto it = pending_.find(r.id());
        if (it == pending_.end()) continue;
        ready.emplace_back(std::move(it->second.done), &r);
        pending_.erase(it);
      }
      if (pending_.empty()) cv_.notify_all();
      delivering_ = true;
      delivering_thread_ = std::this_thread::get_id();
    }
    const void* const outer_call = gdr::delivering_call;
    gdr::delivering_call = this;
    for (auto& [cb, r] : ready) {
      if (r->code() == 0) {
        // A Stream's ops never ask for inline answers (client_ops.cc says why).
        if (!r->data().empty()) {
          cb(gdr::UnaskedInlineAnswer(r->data().size()));
          continue;
        }
        OpResult result{r->bytes(), r->service_ns(), r->synced(), std::nullopt, r->path()};
        if (r->has_crc32c()) result.crc32c = r->crc32c();
        cb(std::move(result));
      } else {
        absl::Status st(static_cast<absl::StatusCode>(r->code()), r->message());
        cb(r->not_admitted() ? gdr::MarkNotAdmitted(std::move(st)) : std::move(st));
      }
    }
    gdr::delivering_call = outer_call;
    {
      std::lock_guard<std::mutex> lock(mu_);
      delivering_ = false;
      writes_.Flush();
    }
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& s) override {
    absl::flat_hash_map<uint64_t, Pending> orphans;
    absl::Status status = FromGrpcStatus(s);
    {
      // From here Submit refuses, so no op can join pending_ after this swap.
      std::lock_guard<std::mutex> lock(mu_);
      orphans.swap(pending_);
      writes_.Discard();
      if (status.ok() && !orphans.empty()) {
        status = absl::InternalError("stream ended with ops unanswered");
      }
      if (client_closed_ && absl::IsCancelled(status)) {
        status = absl::CancelledError(
            "the stream's Client was closed while the stream was open: ops in flight were "
            "cancelled");
      }
      status_ = status;
      ended_ = true;
    }
    for (auto& [id, p] : orphans) {
      p.done(status.ok() ? absl::UnavailableError("stream ended before the op was answered")
                         : status);
    }
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }

 private:
  void ReleaseHoldLocked() {
    if (hold_released_) return;
    hold_released_ = true;
    RemoveHold();
  }

  // Packs the ops submitted so far, up to a message's worth, into out_ and writes it. Ops
  // whose deadline failed them before they left are not sent: the caller has its answer.
  size_t StartWriteLocked(std::deque<v1::StreamOp>& unsent) {
    out_.Clear();
    const size_t n = std::min<size_t>(unsent.size(),
                                      batch_ != 0 ? batch_ : gdr::kMaxOpsPerMessage);
    out_.mutable_ops()->Reserve(static_cast<int>(n));
    for (size_t i = 0; i < n; ++i) {
      if (pending_.contains(unsent[i].id())) *out_.add_ops() = std::move(unsent[i]);
    }
    gdr::stream_messages.fetch_add(1, std::memory_order_relaxed);
    StartWrite(&out_);
    return n;
  }

  // Wakes at `when` to fail the ops past their deadline. A later wake already armed stays and
  // only looks again when it comes.
  void ArmLocked(absl::Time when) {
    if (when == absl::InfiniteFuture() || timer_ == nullptr) return;  // no timer: Client gone
    armed_at_ = when;
    timers_.push_back(timer_->Schedule(when, [this] { ExpireOverdue(); }));
  }

  // On the timer's thread: fails every op past its deadline and arms the next wake.
  void ExpireOverdue() {
    std::vector<OpCallback> overdue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const absl::Time now = absl::Now();
      absl::Time next = absl::InfiniteFuture();
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->second.deadline <= now) {
          overdue.push_back(std::move(it->second.done));
          pending_.erase(it++);
        } else {
          next = std::min(next, it->second.deadline);
          ++it;
        }
      }
      if (!overdue.empty()) expired_any_ = true;
      if (pending_.empty()) cv_.notify_all();
      armed_at_ = absl::InfiniteFuture();
      ArmLocked(next);
    }
    for (OpCallback& cb : overdue) {
      cb(absl::DeadlineExceededError(
          "the daemon did not answer the op within its deadline (OpOptions::deadline, else "
          "ClientOptions::rpc_timeout)"));
    }
  }

  void EndWritesLocked(bool all_written) {
    // Not all written: a write failed or the read side ended, and the call is over already.
    if (!all_written) return;
    StartWritesDone();
    ReleaseHoldLocked();  // the client will start nothing more
  }

  struct Pending {
    OpCallback done;
    absl::Time deadline;
  };

  Client* const client_;  // used only inside a ClientCalls::Use
  const std::shared_ptr<gdr::ClientCalls> calls_;
  const std::shared_ptr<gdr::AdmissionWindow> window_;  // null with fail_when_full
  const std::chrono::milliseconds rpc_timeout_;
  const size_t batch_;  // StreamOptions::max_ops_per_message; 0: none of its own
  gdr::AdmissionWindow::Scope scope_;  // this stream's ops in the client's window
  grpc::ClientContext ctx_;
  v1::StreamResponse response_;
  std::mutex mu_;
  std::condition_variable cv_;
  v1::StreamRequest out_;  // the message being written
  // Submitted ops not yet in a message. Ending once Close was called; discarded once the call
  // is over (a write failed, the read side ended).
  gdr::WriteQueue<v1::StreamOp> writes_;
  absl::flat_hash_map<uint64_t, Pending> pending_;
  absl::Time armed_at_ = absl::InfiniteFuture();  // the earliest wake armed
  // The Client's timer, given back when the Client goes (then nothing more is armed).
  std::shared_ptr<gdr::DeadlineTimer> timer_;
  std::vector<gdr::DeadlineTimer::Id> timers_;     // every wake armed, cancelled at the end
  bool expired_any_ = false;                       // an op went unanswered past its deadline
  uint64_t next_id_ = 1;
  bool delivering_ = false;  // OnReadDone is running answer callbacks on delivering_thread_
  std::thread::id delivering_thread_;
  bool hold_released_ = false;  // after this, nothing may be started on the call
  bool ended_ = false;          // OnDone has begun: Submit refuses
  bool done_ = false;           // OnDone has answered every op
  bool client_closed_ = false;  // the Client cancelled the call as it went
  absl::Status status_;
};

struct OpStream::Hold {
  std::vector<std::shared_ptr<Reactor>> calls;  // never empty
  std::atomic<size_t> next{0};                  // the call the next op goes on, modulo
};

OpStream::OpStream(std::unique_ptr<Hold> hold) : hold_(std::move(hold)) {}
OpStream::~OpStream() { (void)Close(); }

void OpStream::Submit(OpKind kind, const Extent& extent, const Buffer& buffer,
                      size_t buffer_offset, OpCallback done, const OpOptions& options) {
  if (!gdr::ClientAccess::ApplyOptions(options, &kind, done)) return;
  // An op submitted from one of this stream's answers goes on the call that answered, with the
  // others its callbacks submit (round robin there scattered a closed loop's batch over calls
  // that were not delivering, in many small messages); any other op on the next call in turn,
  // so that the calls' message loops run side by side.
  const std::shared_ptr<Reactor>* chosen = nullptr;
  if (gdr::delivering_call != nullptr) {
    for (const std::shared_ptr<Reactor>& call : hold_->calls) {
      if (call.get() == gdr::delivering_call) chosen = &call;
    }
  }
  if (chosen == nullptr) {
    chosen =
        &hold_->calls[hold_->next.fetch_add(1, std::memory_order_relaxed) % hold_->calls.size()];
  }
  const std::shared_ptr<Reactor>& reactor = *chosen;
  gdr::ClientCalls::Use use(reactor->calls());
  if (!use) {
    done(Reactor::ClientGone());
    return;
  }
  Client* client = reactor->client();
  const std::chrono::system_clock::time_point deadline = client->DeadlineOf(options);
  const bool crc = options.crc32c.value_or(client->crc32c());
  // `piece` may run again later, from an answer (a slice resent on another rail), when the
  // stream or the Client may be gone: it holds neither, and looks for both.
  gdr::ClientAccess::Dispatch(
      *client, extent, buffer, buffer_offset, crc, buffer.Track(kind, std::move(done)),
      [weak = std::weak_ptr<Reactor>(reactor), client, kind, crc, &buffer, deadline](
          const Extent& e, size_t offset, int rail, OpCallback cb) {
        std::shared_ptr<Reactor> r = weak.lock();
        if (r == nullptr) {
          cb(absl::FailedPreconditionError("the stream was closed"));
          return;
        }
        gdr::ClientCalls::Use piece_use(r->calls());
        if (!piece_use) {
          cb(Reactor::ClientGone());
          return;
        }
        // The window may send the piece later, from another thread: the stream is alive then,
        // as its Close waits until the window has nothing of its scope (AwaitIdle).
        Reactor* raw = r.get();
        client->Admit(raw->scope(), e.length, deadline,
                      [raw, kind, crc, &buffer, e, offset, rail](
                          std::chrono::system_clock::time_point dl, OpCallback sent) {
                        raw->Submit(kind, e, buffer, offset, rail, crc, gdr::FromDeadline(dl),
                                    std::move(sent));
                      },
                      std::move(cb));
      });
}

absl::Status OpStream::Close() {
  const std::vector<std::shared_ptr<Reactor>>& calls = hold_->calls;
  for (const auto& call : calls) call->BeginClose();
  for (const auto& call : calls) call->AwaitAnswered();
  const auto end_by = calls.front()->EndDeadline();
  absl::Status first;
  for (const auto& call : calls) {
    absl::Status s = call->EndBy(end_by);
    if (first.ok()) first = std::move(s);
  }
  return first;
}

absl::StatusOr<std::unique_ptr<OpStream>> Client::OpenStream(const StreamOptions& options) {
  // ClientOptions::stream_calls was checked by Connect.
  if (options.calls > kMaxStreamCalls) {
    return absl::InvalidArgumentError(absl::StrCat("StreamOptions::calls of ", options.calls,
                                                   ": a Stream spreads its ops over 1 to ",
                                                   kMaxStreamCalls, " calls"));
  }
  const uint32_t calls = options.calls != 0 ? options.calls : options_.stream_calls;
  if (options.max_ops_per_message > static_cast<uint32_t>(gdr::kMaxOpsPerMessage)) {
    return absl::InvalidArgumentError(
        absl::StrCat("StreamOptions::max_ops_per_message of ", options.max_ops_per_message,
                     ": at most ", gdr::kMaxOpsPerMessage, " ops fit one message (0: that many)"));
  }
  auto hold = std::make_unique<OpStream::Hold>();
  for (uint32_t i = 0; i < calls; ++i) {
    auto reactor = std::make_shared<OpStream::Reactor>(this, calls_, window_, timer_,
                                                       options.max_ops_per_message);
    if (!calls_->AddStream(reactor)) {
      // Only while the Client is being destroyed (a use of it racing its destructor).
      reactor->CancelForClientClose();
      (void)reactor->Close();
      for (const auto& opened : hold->calls) {
        opened->CancelForClientClose();
        (void)opened->Close();
      }
      return absl::FailedPreconditionError("the Client is closed");
    }
    hold->calls.push_back(std::move(reactor));
  }
  return std::unique_ptr<OpStream>(new OpStream(std::move(hold)));
}

}  // namespace gdrstore
