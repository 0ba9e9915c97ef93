#include "common/verbs/completion_poller.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/completion_batch.h"
#include "common/base/log.h"
#include "common/base/thread_name.h"
#include "common/verbs/verbs_status.h"

namespace gdr::verbs {

absl::StatusOr<PollMode> ParsePollMode(absl::string_view text) {
  if (text == "busy") return PollMode::kBusy;
  if (text == "event") return PollMode::kEvent;
  if (text == "adaptive") return PollMode::kAdaptive;
  return absl::InvalidArgumentError(
      absl::StrCat("poll mode '", text, "' is not one of busy, event, adaptive"));
}

const char* PollModeName(PollMode mode) {
  switch (mode) {
    case PollMode::kBusy: return "busy";
    case PollMode::kEvent: return "event";
    case PollMode::kAdaptive: return "adaptive";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<CompletionPoller>> CompletionPoller::Create(
    ibv_context* context, const PollerOptions& options, std::string name) {
  if (options.batch <= 0 || options.batch > kMaxBatch || options.cq_depth == 0) {
    return absl::InvalidArgumentError(absl::StrCat("poller batch ", options.batch, " is not in 1..",
                                                   kMaxBatch, ", or CQ depth ", options.cq_depth,
                                                   " is 0"));
  }
  auto p = std::unique_ptr<CompletionPoller>(new CompletionPoller(options, std::move(name)));
  ibv_device_attr attr{};
  if (ibv_query_device(context, &attr) != 0) return VerbsError(errno, "ibv_query_device");
  p->depth_ = std::min<uint32_t>(options.cq_depth, static_cast<uint32_t>(attr.max_cqe));
  p->channel_.reset(ibv_create_comp_channel(context));
  if (!p->channel_) return VerbsError(errno, "ibv_create_comp_channel");
  // Non-blocking so that a spurious wake-up never parks the thread in ibv_get_cq_event.
  const int fl = fcntl(p->channel_->fd, F_GETFL);
  if (fl < 0 || fcntl(p->channel_->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
    return VerbsError(errno, "fcntl(O_NONBLOCK) on the completion channel");
  }
  p->cq_.reset(ibv_create_cq(context, static_cast<int>(p->depth_), nullptr, p->channel_.get(), 0));
  if (!p->cq_) return VerbsError(errno, "ibv_create_cq", absl::StrCat(p->depth_, " entries"));
  p->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (p->wake_fd_ < 0) return VerbsError(errno, "eventfd");
  p->last_loop_ns_ = absl::GetCurrentTimeNanos();
  p->thread_ = std::thread([raw = p.get()] { raw->Loop(); });
  p->pinned_ = p->Pin();
  return p;
}

CompletionPoller::~CompletionPoller() {
  Stop();
  if (cq_ && unacked_events_) ibv_ack_cq_events(cq_.get(), unacked_events_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

bool CompletionPoller::TryReserve(uint32_t n) {
  uint32_t cur = reserved_.load(std::memory_order_relaxed);
  do {
    if (cur + n > depth_) return false;
  } while (!reserved_.compare_exchange_weak(cur, cur + n, std::memory_order_acq_rel));
  return true;
}

void CompletionPoller::Release(uint32_t n) { reserved_.fetch_sub(n, std::memory_order_acq_rel); }

void CompletionPoller::Post(std::function<void()> task) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopped_) {
      tasks_.push_back(std::move(task));
      has_tasks_.store(true, std::memory_order_release);
      Wake();
      return;
    }
  }
  task();  // after Stop: the caller's thread is the only one left
}

std::vector<int> CompletionPoller::Pin() {
  if (options_.cpus.empty()) return {};
  // Only CPUs the process may run on: an operator's taskset or CPUAffinity= still holds.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) CPU_ZERO(&allowed);
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> taken;
  for (int cpu : options_.cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &allowed)) continue;
    CPU_SET(cpu, &set);
    taken.push_back(cpu);
  }
  if (taken.empty()) {
    GDR_LOG(kWarning) << name_ << ": the completion poller is not pinned: none of the "
                      << options_.cpus.size() << " CPUs asked for is allowed to this process";
    return {};
  }
  if (const int rc = pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set); rc != 0) {
    GDR_LOG(kWarning) << name_ << ": the completion poller is not pinned: pthread_setaffinity_np: "
                      << std::strerror(rc);
    return {};
  }
  return taken;
}

void CompletionPoller::Wake() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

void CompletionPoller::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
  }
  stop_.store(true);
  Wake();
  if (thread_.joinable()) thread_.join();
  std::vector<std::function<void()>> rest;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    rest.swap(tasks_);
  }
  for (auto& t : rest) t();
}

absl::Duration CompletionPoller::since_last_loop() const {
  return absl::Nanoseconds(absl::GetCurrentTimeNanos() -
                           last_loop_ns_.load(std::memory_order_relaxed));
}

bool CompletionPoller::Healthy(absl::Duration max_age) const {
  return since_last_loop() <= std::max(max_age, 2 * kIdleWake);
}

void CompletionPoller::RunTasks() {
  if (!has_tasks_.load(std::memory_order_acquire)) return;
  std::vector<std::function<void()>> run;
  {
    absl::MutexLock lock(&mu_);
    run.swap(tasks_);
    has_tasks_.store(false, std::memory_order_release);
  }
  for (auto& t : run) t();
}

int CompletionPoller::PollOnce(ibv_wc* wcs) {
  const int n = ibv_poll_cq(cq_.get(), options_.batch, wcs);
  if (n < 0) {
    GDR_LOG_EVERY_N_SEC(kError, 5) << name_ << ": ibv_poll_cq failed (" << n << ")";
    return 0;
  }
  CompletionBatch burst;  // what the handlers defer runs once, after the whole batch
  for (int i = 0; i < n; ++i) {
    if (wcs[i].wr_id == 0) {
      GDR_LOG_EVERY_N_SEC(kWarning, 5) << name_ << ": completion without a handler ("
                                       << WcStatusName(wcs[i].status) << ")";
      continue;
    }
    reinterpret_cast<CompletionHandler*>(wcs[i].wr_id)->OnCompletion(wcs[i]);
  }
  if (n > 0) completions_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  return n;
}

// Arms the CQ, re-polls (a CQE may have landed between the last poll and the arming), then
// waits on the channel and the wake-up fd. Wakes at least every kIdleWake to refresh the health
// stamp.
void CompletionPoller::Sleep() {
  if (ibv_req_notify_cq(cq_.get(), 0) != 0) {
    GDR_LOG_EVERY_N_SEC(kError, 5) << name_ << ": ibv_req_notify_cq failed";
    return;
  }
  ibv_wc wcs[kMaxBatch];
  if (PollOnce(wcs) > 0) return;
  if (stop_.load() || has_tasks_.load(std::memory_order_acquire)) return;
  pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  const int r = ::poll(fds, 2, static_cast<int>(absl::ToInt64Milliseconds(kIdleWake)));
  if (r <= 0) return;
  if (fds[0].revents & POLLIN) {
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    while (ibv_get_cq_event(channel_.get(), &ev_cq, &ev_ctx) == 0) {
      if (++unacked_events_ >= 64) {
        ibv_ack_cq_events(cq_.get(), unacked_events_);
        unacked_events_ = 0;
      }
    }
  }
  if (fds[1].revents & POLLIN) {
    uint64_t v;
    (void)!::read(wake_fd_, &v, sizeof v);
  }
}

void CompletionPoller::Loop() {
  SetThreadName(absl::StrCat("gdr-cq-", name_).c_str());
  std::vector<ibv_wc> wcs(static_cast<size_t>(options_.batch));
  int64_t last_work = absl::GetCurrentTimeNanos();
  const int64_t spin_ns = absl::ToInt64Nanoseconds(options_.spin);
  uint32_t idle_polls = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    const int64_t now = absl::GetCurrentTimeNanos();
    last_loop_ns_.store(now, std::memory_order_relaxed);
    RunTasks();
    if (PollOnce(wcs.data()) > 0) {
      last_work = now;
      idle_polls = 0;
      continue;
    }
    switch (options_.mode) {
      case PollMode::kBusy:
        if (++idle_polls % 1024 == 0) std::this_thread::yield();
        break;
      case PollMode::kAdaptive:
        if (now - last_work < spin_ns) break;
        Sleep();
        last_work = absl::GetCurrentTimeNanos();
        break;
      case PollMode::kEvent:
        Sleep();
        break;
    }
  }
  RunTasks();
}

}  // namespace gdr::verbs
