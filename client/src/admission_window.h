// Keeps one Client's ops within the daemon's in-flight limits (GetInfo's Limits: ops per
// Stream, ops and bytes daemon-wide), so that a caller may hand over any number of ops at once
// and never has to window its own submissions: an op that would not be admitted waits here,
// in submission order, until answers free room, and one the daemon refused anyway (its limits
// are shared with other clients) is sent again after a short pause. Every op keeps its
// deadline while it waits. With ClientOptions::fail_when_full the window is bypassed and the
// daemon's refusal reaches the caller.
//
// An op that finds room and nothing waiting takes it with atomics alone, so the window adds no
// lock to the path of ops that fit; the lock is taken only while ops wait, after a refusal, or
// while a Stream closes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/src/deadline_timer.h"
#include "gdrstore/types.h"

namespace gdr {

// Made with std::make_shared only: an op's answer holds the window, so one answered after the
// Client has gone still finds it.
class AdmissionWindow : public std::enable_shared_from_this<AdmissionWindow> {
 public:
  // 0: no limit known (the daemon's refusals still pace the ops).
  struct Limits {
    uint64_t max_ops = 0;
    uint64_t max_bytes = 0;
    uint64_t max_per_stream = 0;
  };
  // One Stream's ops in flight, against max_per_stream. Owned by the stream, which must keep
  // it until every op submitted with it has been answered.
  struct Scope {
    std::atomic<uint64_t> in_flight{0};
    std::atomic<bool> closing{false};  // AwaitIdle is waiting: answers take the lock to wake it
    uint64_t waiting = 0;              // in held_, under the window's mutex
  };
  // Sends the op now, with the deadline it keeps; `done` is the window's and must run once.
  using Send = std::function<void(std::chrono::system_clock::time_point deadline,
                                  gdrstore::OpCallback done)>;

  // The timer is shared: the window may be let go last on a gRPC thread.
  explicit AdmissionWindow(std::shared_ptr<DeadlineTimer> timer) : timer_(std::move(timer)) {}
  // Close().
  ~AdmissionWindow();
  AdmissionWindow(const AdmissionWindow&) = delete;
  AdmissionWindow& operator=(const AdmissionWindow&) = delete;

  // New limits (GetInfo's, or after a reload); ops waiting that now fit are sent.
  void SetLimits(const Limits& limits);
  // Runs `want_limits` (which asks the daemon for its limits and calls SetLimits) at most once
  // a second, after the daemon refused an op: its limits may have changed.
  void OnRefusalAskLimits(std::function<void()> want_limits);

  // Sends the op of `bytes` at once when it fits and nothing waits, else when room frees up.
  // `done` runs once: with the op's answer, with DEADLINE_EXCEEDED when `deadline` passes
  // before it could be sent, with the daemon's refusal if that came at the deadline, or with
  // CANCELLED once Close has begun. Thread-safe; never blocks on the daemon. `scope`: the
  // Stream it goes on (nullptr for a unary call).
  void Submit(Scope* scope, uint64_t bytes, absl::Time deadline, Send send,
              gdrstore::OpCallback done);

  // The asynchronous GetInfo that fetches the limits: Begin records how to cancel it (false
  // when one is in flight already, or the window is closing: then start none), End is called
  // once by its callback, and CancelFetchAndWait (the Client closing) cancels it and waits for
  // End, so that no call of the Client's outlives it.
  bool BeginFetch(std::function<void()> cancel);
  void EndFetch();
  void CancelFetchAndWait();

  // The Client is closing: ops still waiting fail CANCELLED, and so do later ones at once; the
  // limits' fetch is cancelled and waited for (CancelFetchAndWait); nothing is sent or resent
  // afterwards, and want_limits is not run again. Once; later calls do nothing more.
  void Close();
  // Waits until no op of `scope` is waiting or in flight (a Stream closing: each ends by its
  // deadline). Not from an op's callback.
  void AwaitIdle(Scope* scope);

  struct Stats {
    uint64_t waited = 0;    // ops that could not be sent at once
    uint64_t resent = 0;    // ops sent again after the daemon did not admit them
    uint64_t waiting = 0;   // now
    bool limits_known = false;
  };
  Stats stats() const;

 private:
  struct Held {
    Scope* scope;
    uint64_t bytes;
    absl::Time deadline;
    Send send;
    gdrstore::OpCallback done;
    absl::Time not_before = absl::InfinitePast();  // resent after a refusal: a pause first
    absl::Duration pause = absl::ZeroDuration();   // the last pause; doubles per refusal
    DeadlineTimer::Id deadline_timer = 0;
    uint64_t id = 0;
  };
  using HeldPtr = std::shared_ptr<Held>;

  enum class Taken { kYes, kStreamFull, kFull };
  // Takes room for an op if it fits now (atomics; undone when it does not).
  Taken Take(Scope* scope, uint64_t bytes);
  void Release(Scope* scope, uint64_t bytes);
  // Moves the ops that may be sent now out of held_, in order (the caller sends them
  // unlocked).
  std::vector<HeldPtr> ReadyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushLocked(const HeldPtr& h, bool front) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a ReadyLocked: `h`, just pushed, waits with its deadline armed unless it was sent.
  void ArmUnlessSentLocked(const HeldPtr& h, const std::vector<HeldPtr>& ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendAll(std::vector<HeldPtr> ready);
  gdrstore::OpCallback Answer(HeldPtr h);
  void Answered(const HeldPtr& h, absl::StatusOr<gdrstore::OpResult> r);
  void Expire(uint64_t id);
  // `id`: the wake's own timer, read under mu_ (it is written there after scheduling).
  void Wake(const std::shared_ptr<DeadlineTimer::Id>& id);

  const std::shared_ptr<DeadlineTimer> timer_;
  // Room in use and the limits, read and taken without the lock on the fast path.
  std::atomic<uint64_t> ops_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> max_ops_{0}, max_bytes_{0}, max_per_stream_{0};
  // Ops in held_: while any, every answer takes the lock to send them (seq_cst with the room
  // counters, so that an answer and a newly held op cannot miss each other).
  std::atomic<uint64_t> held_count_{0};
  // Close has begun: Submit fails at once (read without the lock), a refusal is not resent.
  std::atomic<bool> closed_{false};
  mutable absl::Mutex mu_;
  std::list<HeldPtr> held_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Wakes for ops pausing after a refusal: the earliest one armed, and every one not yet run
  // (cancelled with the window).
  absl::Time wake_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::vector<DeadlineTimer::Id> wakes_ ABSL_GUARDED_BY(mu_);
  std::function<void()> want_limits_ ABSL_GUARDED_BY(mu_);
  std::function<void()> cancel_fetch_ ABSL_GUARDED_BY(mu_);  // set while a fetch is in flight
  bool fetching_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time asked_limits_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gdr
