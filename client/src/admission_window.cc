#include "client/src/admission_window.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace gdr {

AdmissionWindow::~AdmissionWindow() {
  std::list<HeldPtr> left;
  std::vector<DeadlineTimer::Id> wakes;
  {
    absl::MutexLock lock(&mu_);
    left.swap(held_);
    wakes.swap(wakes_);
  }
  for (DeadlineTimer::Id id : wakes) timer_->Cancel(id);
  for (const HeldPtr& h : left) {
    if (h->deadline_timer != 0) timer_->Cancel(h->deadline_timer);
    h->done(absl::CancelledError("the client closed before the op could be sent"));
  }
}

void AdmissionWindow::SetLimits(const Limits& limits) {
  std::vector<HeldPtr> ready;
  {
    absl::MutexLock lock(&mu_);
    limits_ = limits;
    stats_.limits_known = true;
    ready = ReadyLocked();
  }
  SendAll(std::move(ready));
}

void AdmissionWindow::OnRefusalAskLimits(std::function<void()> want_limits) {
  absl::MutexLock lock(&mu_);
  want_limits_ = std::move(want_limits);
}

void AdmissionWindow::Submit(Scope* scope, uint64_t bytes, absl::Time deadline, Send send,
                             gdrstore::OpCallback done) {
  auto h = std::make_shared<Held>();
  h->scope = scope;
  h->bytes = bytes;
  h->deadline = deadline;
  h->send = std::move(send);
  h->done = std::move(done);
  std::vector<HeldPtr> ready;
  {
    absl::MutexLock lock(&mu_);
    h->id = next_id_++;
    held_.push_back(h);
    if (scope != nullptr) ++scope->waiting;
    ready = ReadyLocked();
    if (ready.empty() || ready.back() != h) ++stats_.waited;
  }
  SendAll(std::move(ready));
}

bool AdmissionWindow::StreamFullLocked(const Held& h) const {
  return h.scope != nullptr && limits_.max_per_stream != 0 &&
         h.scope->in_flight >= limits_.max_per_stream;
}

bool AdmissionWindow::FitsLocked(const Held& h) const {
  if (limits_.max_ops != 0 && ops_ >= limits_.max_ops) return false;
  // The daemon admits one op larger than its byte budget when nothing else is in flight.
  if (limits_.max_bytes != 0 && bytes_ != 0 && bytes_ + h.bytes > limits_.max_bytes) return false;
  return true;
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
    if (StreamFullLocked(h)) {
      ++it;
      continue;
    }
    // Room daemon-wide goes in submission order: a large op is not passed over for ever.
    if (!FitsLocked(h)) break;
    ++ops_;
    bytes_ += h.bytes;
    if (h.scope != nullptr) {
      ++h.scope->in_flight;
      --h.scope->waiting;
    }
    ready.push_back(std::move(*it));
    it = held_.erase(it);
  }
  // Those that stay wait with their deadlines armed.
  for (const HeldPtr& h : held_) {
    if (h->deadline_timer == 0 && h->deadline != absl::InfiniteFuture()) {
      h->deadline_timer = timer_->Schedule(h->deadline, [this, id = h->id] { Expire(id); });
    }
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

void AdmissionWindow::SendAll(std::vector<HeldPtr> ready) {
  for (HeldPtr& h : ready) {
    if (h->deadline_timer != 0) {
      timer_->Cancel(h->deadline_timer);  // gone from held_: a firing Expire finds nothing
      h->deadline_timer = 0;
    }
    Send send = h->send;
    send(h->deadline, [this, h](absl::StatusOr<gdrstore::OpResult> r) { Answered(h, std::move(r)); });
  }
}

void AdmissionWindow::Answered(const HeldPtr& h, absl::StatusOr<gdrstore::OpResult> r) {
  std::vector<HeldPtr> ready;
  bool again = false;
  std::function<void()> ask;
  {
    absl::MutexLock lock(&mu_);
    --ops_;
    bytes_ -= h->bytes;
    if (h->scope != nullptr) --h->scope->in_flight;
    const absl::Time now = absl::Now();
    if (!r.ok() && IsNotAdmitted(r.status()) && now < h->deadline) {
      // Other clients hold the daemon's room (or its limits shrank): pause, doubling from
      // 1 ms to 64 ms, then send it again ahead of later ops.
      h->pause = std::clamp(h->pause * 2, absl::Milliseconds(1), absl::Milliseconds(64));
      h->not_before = std::min(now + h->pause, h->deadline);
      held_.push_front(h);
      if (h->scope != nullptr) ++h->scope->waiting;
      ++stats_.resent;
      again = true;
      if (want_limits_ && now - asked_limits_at_ > absl::Seconds(1)) {
        asked_limits_at_ = now;
        ask = want_limits_;
      }
    }
    ready = ReadyLocked();
  }
  SendAll(std::move(ready));
  if (ask) ask();
  if (!again) h->done(std::move(r));
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
        break;
      }
    }
    if (expired == nullptr) return;  // sent meanwhile
    expired->deadline_timer = 0;
    if (expired->scope != nullptr) --expired->scope->waiting;
    why = absl::StrCat(
        "the op's deadline passed while it waited for room under the daemon's in-flight limits (",
        ops_, " ops and ", bytes_, " bytes of this client in flight; limits: ",
        limits_.max_ops, " ops, ", limits_.max_bytes, " bytes, ", limits_.max_per_stream,
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

void AdmissionWindow::AwaitIdle(Scope* scope) {
  absl::MutexLock lock(&mu_);
  auto idle = [scope]() { return scope->waiting == 0 && scope->in_flight == 0; };
  mu_.Await(absl::Condition(&idle));
}

AdmissionWindow::Stats AdmissionWindow::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace gdr
