#include "client/src/admission_window.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_status.h"

namespace gdr {

namespace {
constexpr char kClosedMessage[] = "the client closed before the op could be sent";
}  // namespace

AdmissionWindow::~AdmissionWindow() { Close(); }

void AdmissionWindow::Close() {
  std::list<HeldPtr> left;
  std::vector<DeadlineTimer::Id> wakes;
  {
    absl::MutexLock lock(&mu_);
    closed_.store(true);
    left.swap(held_);
    wakes.swap(wakes_);
    held_count_.store(0);
    want_limits_ = nullptr;  // it reaches the Client, which is going
    for (const HeldPtr& h : left) {
      if (h->scope != nullptr) --h->scope->waiting;  // wakes the Stream's AwaitIdle
    }
    stats_.waiting = 0;
  }
  CancelFetchAndWait();
  for (DeadlineTimer::Id id : wakes) timer_->Cancel(id);
  for (const HeldPtr& h : left) {
    if (h->deadline_timer != 0) timer_->Cancel(h->deadline_timer);
    h->done(absl::CancelledError(kClosedMessage));
  }
}

void AdmissionWindow::SetLimits(const Limits& limits) {
  std::vector<HeldPtr> ready;
  {
    absl::MutexLock lock(&mu_);
    max_ops_.store(limits.max_ops);
    max_bytes_.store(limits.max_bytes);
    max_per_stream_.store(limits.max_per_stream);
    stats_.limits_known = true;
    ready = ReadyLocked();
  }
  SendAll(std::move(ready));
}

void AdmissionWindow::OnRefusalAskLimits(std::function<void()> want_limits) {
  absl::MutexLock lock(&mu_);
  want_limits_ = std::move(want_limits);
}

AdmissionWindow::Taken AdmissionWindow::Take(Scope* scope, uint64_t bytes) {
  const uint64_t max_per_stream = max_per_stream_.load();
  if (scope != nullptr && scope->in_flight.fetch_add(1) >= max_per_stream &&
      max_per_stream != 0) {
    scope->in_flight.fetch_sub(1);
    return Taken::kStreamFull;
  }
  const uint64_t max_ops = max_ops_.load();
  const uint64_t max_bytes = max_bytes_.load();
  const bool ops_full = ops_.fetch_add(1) >= max_ops && max_ops != 0;
  const uint64_t before = bytes_.fetch_add(bytes);
  // The daemon admits one op larger than its byte budget when nothing else is in flight.
  const bool bytes_full = max_bytes != 0 && before != 0 && before + bytes > max_bytes;
  if (ops_full || bytes_full) {
    Release(scope, bytes);
    return Taken::kFull;
  }
  return Taken::kYes;
}

void AdmissionWindow::Release(Scope* scope, uint64_t bytes) {
  bytes_.fetch_sub(bytes);
  ops_.fetch_sub(1);
  if (scope != nullptr) scope->in_flight.fetch_sub(1);
}

void AdmissionWindow::Submit(Scope* scope, uint64_t bytes, absl::Time deadline, Send send,
                             gdrstore::OpCallback done) {
  if (closed_.load()) {
    done(absl::CancelledError(kClosedMessage));
    return;
  }
  auto h = std::make_shared<Held>();
  h->scope = scope;
  h->bytes = bytes;
  h->deadline = deadline;
  h->send = std::move(send);
  h->done = std::move(done);
  // Room and nothing ahead of it: sent at once, no lock.
  if (held_count_.load() == 0 && Take(scope, bytes) == Taken::kYes) {
    h->send(ToDeadline(deadline), Answer(h));
    return;
  }
  std::vector<HeldPtr> ready;
  bool closed = false;
  {
    absl::MutexLock lock(&mu_);
    // Close may have begun since the look above: then the op must not wait (nothing sends it).
    closed = closed_.load();
    if (!closed) {
      h->id = next_id_++;
      PushLocked(h, /*front=*/false);
      ready = ReadyLocked();
      if (std::find(ready.begin(), ready.end(), h) == ready.end()) ++stats_.waited;
      ArmUnlessSentLocked(h, ready);
    }
  }
  if (closed) {
    h->done(absl::CancelledError(kClosedMessage));
    return;
  }
  SendAll(std::move(ready));
}

void AdmissionWindow::PushLocked(const HeldPtr& h, bool front) {
  // Counted first: an answer that frees room after this sees it and sends what waits.
  held_count_.fetch_add(1);
  if (front) {
    held_.push_front(h);
  } else {
    held_.push_back(h);
  }
  if (h->scope != nullptr) ++h->scope->waiting;
}

std::vector<AdmissionWindow::HeldPtr> AdmissionWindow::ReadyLocked() {
  std::vector<HeldPtr> ready;
  const absl::Time now = absl::Now();
  absl::Time wake = absl::InfiniteFuture();
  for (auto it = held_.begin(); it != held_.end();) {
    Held& h = **it;
    // An op resent after a refusal waits out its pause; one whose Stream is full waits for
    // that Stream's answers. Neither holds up the others.
    if (h.not_before > now) {
      wake = std::min(wake, h.not_before);
      ++it;
      continue;
    }
    const Taken taken = Take(h.scope, h.bytes);
    if (taken == Taken::kStreamFull) {
      ++it;
      continue;
    }
    // Room daemon-wide goes in submission order: a large op is not passed over for ever.
    if (taken == Taken::kFull) break;
    if (h.scope != nullptr) --h.scope->waiting;
    ready.push_back(std::move(*it));
    it = held_.erase(it);
    held_count_.fetch_sub(1);
  }
  if (wake < wake_at_) {
    // An earlier wake than the one armed; the later one, when it comes, only looks again.
    wake_at_ = wake;
    auto slot = std::make_shared<DeadlineTimer::Id>(0);
    *slot = timer_->Schedule(wake, [this, slot] { Wake(slot); });  // runs after mu_ is let go
    wakes_.push_back(*slot);
  }
  stats_.waiting = held_.size();
  return ready;
}

void AdmissionWindow::ArmUnlessSentLocked(const HeldPtr& h, const std::vector<HeldPtr>& ready) {
  // Armed once, when an op starts to wait, rather than by every look at held_ (which each
  // answer takes while ops wait).
  if (h->deadline == absl::InfiniteFuture() || h->deadline_timer != 0) return;
  if (std::find(ready.begin(), ready.end(), h) != ready.end()) return;
  h->deadline_timer = timer_->Schedule(h->deadline, [this, id = h->id] { Expire(id); });
}

void AdmissionWindow::SendAll(std::vector<HeldPtr> ready) {
  for (HeldPtr& h : ready) {
    if (h->deadline_timer != 0) {
      timer_->Cancel(h->deadline_timer);  // gone from held_: a firing Expire finds nothing
      h->deadline_timer = 0;
    }
    h->send(ToDeadline(h->deadline), Answer(h));
  }
}

gdrstore::OpCallback AdmissionWindow::Answer(HeldPtr h) {
  // The window is held by the answer: one may come after the Client (which Closed the window)
  // is gone.
  return [self = shared_from_this(), h = std::move(h)](absl::StatusOr<gdrstore::OpResult> r) {
    self->Answered(h, std::move(r));
  };
}

void AdmissionWindow::Answered(const HeldPtr& h, absl::StatusOr<gdrstore::OpResult> r) {
  Release(h->scope, h->bytes);
  bool refused = !r.ok() && IsNotAdmitted(r.status()) && absl::Now() < h->deadline;
  if (!refused && held_count_.load() == 0 &&
      (h->scope == nullptr || !h->scope->closing.load())) {
    h->done(std::move(r));  // the fast path: nothing waits for this room
    return;
  }
  std::vector<HeldPtr> ready;
  std::function<void()> ask;
  {
    absl::MutexLock lock(&mu_);
    if (closed_.load()) refused = false;  // not resent: the refusal is the op's answer
    if (refused) {
      // Other clients hold the daemon's room (or its limits shrank): pause, doubling from
      // 1 ms to 64 ms, then send it again ahead of later ops.
      const absl::Time now = absl::Now();
      h->pause = std::clamp(h->pause * 2, absl::Milliseconds(1), absl::Milliseconds(64));
      h->not_before = std::min(now + h->pause, h->deadline);
      if (h->id == 0) h->id = next_id_++;
      PushLocked(h, /*front=*/true);
      ++stats_.resent;
      if (want_limits_ && now - asked_limits_at_ > absl::Seconds(1)) {
        asked_limits_at_ = now;
        ask = want_limits_;
      }
    }
    ready = ReadyLocked();
    if (refused) ArmUnlessSentLocked(h, ready);
  }  // letting go of mu_ also wakes an AwaitIdle of this op's Stream
  SendAll(std::move(ready));
  if (ask) ask();
  if (!refused) h->done(std::move(r));
}

void AdmissionWindow::Expire(uint64_t id) {
  HeldPtr expired;
  std::vector<HeldPtr> ready;
  std::string why;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = held_.begin(); it != held_.end(); ++it) {
      if ((*it)->id == id) {
        expired = std::move(*it);
        held_.erase(it);
        held_count_.fetch_sub(1);
        break;
      }
    }
    if (expired == nullptr) return;  // sent meanwhile
    expired->deadline_timer = 0;
    if (expired->scope != nullptr) --expired->scope->waiting;
    why = absl::StrCat(
        "the op's deadline passed while it waited for room under the daemon's in-flight limits (",
        ops_.load(), " ops and ", bytes_.load(), " bytes of this client in flight; limits: ",
        max_ops_.load(), " ops, ", max_bytes_.load(), " bytes, ", max_per_stream_.load(),
        " per stream; 0 = not known)");
    ready = ReadyLocked();
  }
  SendAll(std::move(ready));
  expired->done(absl::DeadlineExceededError(why));
}

void AdmissionWindow::Wake(const std::shared_ptr<DeadlineTimer::Id>& id) {
  std::vector<HeldPtr> ready;
  {
    absl::MutexLock lock(&mu_);
    wakes_.erase(std::remove(wakes_.begin(), wakes_.end(), *id), wakes_.end());
    wake_at_ = absl::InfiniteFuture();
    ready = ReadyLocked();
  }
  SendAll(std::move(ready));
}

bool AdmissionWindow::BeginFetch(std::function<void()> cancel) {
  absl::MutexLock lock(&mu_);
  if (fetching_ || closing_) return false;
  fetching_ = true;
  cancel_fetch_ = std::move(cancel);
  return true;
}

void AdmissionWindow::EndFetch() {
  absl::MutexLock lock(&mu_);
  fetching_ = false;
  cancel_fetch_ = nullptr;
}

void AdmissionWindow::CancelFetchAndWait() {
  std::function<void()> cancel;
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    cancel = cancel_fetch_;
  }
  // TryCancel, unlocked: the callback it brings on may run before it returns.
  if (cancel) cancel();
  absl::MutexLock lock(&mu_);
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !fetching_; };
  mu_.Await(absl::Condition(&ended));
}

void AdmissionWindow::AwaitIdle(Scope* scope) {
  absl::MutexLock lock(&mu_);
  // Set before the first look, so that an answer that empties the scope after it takes the
  // lock and so has the condition looked at again.
  scope->closing.store(true);
  auto idle = [scope]() { return scope->waiting == 0 && scope->in_flight.load() == 0; };
  mu_.Await(absl::Condition(&idle));
}

AdmissionWindow::Stats AdmissionWindow::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace gdr
