// The one completion poller of a device: owns a CQ shared by every QP of that device (any
// transport) and a thread that polls it in batches and hands each work completion to the
// CompletionHandler its wr_id points at. Also runs tasks posted to it, so transports can do QP
// state changes and teardown on the same thread that sees completions, without locks between
// the two. Busy polling, completion-channel sleeping, or spinning briefly before sleeping.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/verbs/verbs_ptr.h"

namespace gdr::verbs {

// What a work request's wr_id points at. OnCompletion runs on the poller thread, once per
// signaled work request, and must not block.
class CompletionHandler {
 public:
  virtual void OnCompletion(const ibv_wc& wc) = 0;

 protected:
  ~CompletionHandler() = default;
};

enum class PollMode {
  kBusy,      // never sleeps: lowest latency, one core per device
  kEvent,     // sleeps on the completion channel whenever the CQ is empty
  kAdaptive,  // polls for `spin` after the last completion, then sleeps on the channel
};

// "busy", "event", "adaptive". INVALID_ARGUMENT otherwise.
absl::StatusOr<PollMode> ParsePollMode(absl::string_view text);
const char* PollModeName(PollMode mode);

struct PollerOptions {
  PollMode mode = PollMode::kAdaptive;
  uint32_t cq_depth = 4096;  // capped at the device's max_cqe
  int batch = 32;            // CQEs per ibv_poll_cq: 1..CompletionPoller::kMaxBatch
  absl::Duration spin = absl::Microseconds(50);
  // CPUs the thread is pinned to (of those the process may use), e.g. the device's NUMA node;
  // empty: not pinned.
  std::vector<int> cpus;
};

class CompletionPoller {
 public:
  // The most CQEs one poll takes: the sleeping path polls into a stack array of this size.
  static constexpr int kMaxBatch = 64;

  // Creates the completion channel, the CQ and the thread (named after `name`, pinned to
  // options.cpus where the process may use any of them: a pinning that fails is logged and the
  // thread runs unpinned). INVALID_ARGUMENT for a batch outside 1..kMaxBatch or a zero CQ depth
  // (checked before `context` is touched); the errno status of a verbs call.
  static absl::StatusOr<std::unique_ptr<CompletionPoller>> Create(ibv_context* context,
                                                                  const PollerOptions& options,
                                                                  std::string name);
  // Stop(), then destroys the CQ: every QP using it must have been destroyed before.
  ~CompletionPoller();

  ibv_cq* cq() const { return cq_.get(); }
  // The CPUs the thread is pinned to; empty when it is not pinned.
  const std::vector<int>& pinned_cpus() const { return pinned_; }
  uint32_t depth() const { return depth_; }

  // CQ slot accounting: a poster reserves one slot per signaled WR before posting and the
  // handler releases it on completion, so the CQ can never overrun. Thread-safe.
  bool TryReserve(uint32_t n);
  void Release(uint32_t n);
  uint32_t reserved() const { return reserved_.load(std::memory_order_relaxed); }

  // Runs `task` on the poller thread (FIFO), between batches. Tasks posted after Stop are run
  // by Stop itself, on the caller's thread, so none is ever lost. Thread-safe.
  void Post(std::function<void()> task);
  // Ends the thread (running queued tasks first). Idempotent; not from the poller thread.
  void Stop();
  bool OnPollerThread() const { return std::this_thread::get_id() == thread_.get_id(); }

  // Completions delivered so far, and whether the thread has looped within `max_age` (for the
  // watchdog: a thread stuck in a handler stops looping). An idle poller sleeps up to
  // kIdleWake between loops, so a `max_age` below twice that is raised to it.
  uint64_t completions() const { return completions_.load(std::memory_order_relaxed); }
  bool Healthy(absl::Duration max_age) const;
  // Time since the thread last looped (for the watchdog's message).
  absl::Duration since_last_loop() const;

 private:
  static constexpr absl::Duration kIdleWake = absl::Seconds(1);
  CompletionPoller(PollerOptions options, std::string name)
      : options_(options), name_(std::move(name)) {}
  void Loop();
  int PollOnce(ibv_wc* wcs);
  void RunTasks();
  void Sleep();
  void Wake();
  // Pins the running thread to options_.cpus; the CPUs it took (empty: none, logged why).
  std::vector<int> Pin();

  const PollerOptions options_;
  const std::string name_;
  VerbsPtr<ibv_comp_channel> channel_;
  VerbsPtr<ibv_cq> cq_;  // after the channel: destroyed first
  uint32_t depth_ = 0;
  std::vector<int> pinned_;
  int wake_fd_ = -1;
  unsigned unacked_events_ = 0;  // poller thread only
  std::atomic<uint32_t> reserved_{0};
  std::atomic<uint64_t> completions_{0};
  std::atomic<int64_t> last_loop_ns_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> has_tasks_{false};
  absl::Mutex mu_;
  std::vector<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace gdr::verbs
