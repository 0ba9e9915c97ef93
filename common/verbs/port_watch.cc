#include "common/verbs/port_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/base/thread_name.h"
#include "common/verbs/verbs_status.h"

namespace gdr::verbs {

std::optional<bool> PortEventActivity(const ibv_async_event& event, uint8_t port) {
  switch (event.event_type) {
    case IBV_EVENT_PORT_ACTIVE:
      if (event.element.port_num == port) return true;
      return std::nullopt;
    case IBV_EVENT_PORT_ERR:
      if (event.element.port_num == port) return false;
      return std::nullopt;
    case IBV_EVENT_DEVICE_FATAL:
      return false;  // every port of the device; no later event brings it back
    default:
      return std::nullopt;
  }
}

absl::StatusOr<std::unique_ptr<PortWatch>> PortWatch::Start(ibv_context* context, uint8_t port,
                                                            std::string device,
                                                            OnChange on_change) {
  auto w = std::unique_ptr<PortWatch>(
      new PortWatch(context, port, std::move(device), std::move(on_change)));
  ibv_port_attr pa{};
  if (ibv_query_port(context, port, &pa) != 0) {
    return VerbsError(errno, "ibv_query_port", absl::StrCat(w->device_, " port ", port));
  }
  w->state_.store(pa.state);
  w->active_.store(pa.state == IBV_PORT_ACTIVE);
  // Non-blocking, so that the thread only ever waits in poll(), where Stop reaches it.
  const int fl = fcntl(context->async_fd, F_GETFL);
  if (fl < 0 || fcntl(context->async_fd, F_SETFL, fl | O_NONBLOCK) != 0) {
    return VerbsError(errno, "fcntl(O_NONBLOCK) on the async event fd", w->device_);
  }
  w->stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (w->stop_fd_ < 0) return VerbsError(errno, "eventfd");
  w->last_loop_ns_.store(absl::GetCurrentTimeNanos());
  w->thread_ = std::thread([raw = w.get()] { raw->Loop(); });
  return w;
}

PortWatch::~PortWatch() {
  Stop();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

void PortWatch::Stop() {
  if (stop_.exchange(true)) return;
  const uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

absl::Duration PortWatch::since_last_loop() const {
  return absl::Nanoseconds(absl::GetCurrentTimeNanos() -
                           last_loop_ns_.load(std::memory_order_relaxed));
}

bool PortWatch::Healthy(absl::Duration max_age) const {
  return stop_.load() || since_last_loop() <= std::max(max_age, 2 * kRequery);
}

std::optional<ibv_port_state> PortWatch::QueryState() const {
  ibv_port_attr pa{};
  if (ibv_query_port(context_, port_, &pa) != 0) return std::nullopt;
  return pa.state;
}

void PortWatch::Set(bool active, ibv_port_state state) {
  state_.store(state, std::memory_order_release);
  if (active_.exchange(active, std::memory_order_acq_rel) == active) return;
  if (on_change_) on_change_(active, state);
}

void PortWatch::Requery() {
  const std::optional<ibv_port_state> state = QueryState();
  if (!state) {
    GDR_LOG_EVERY_N_SEC(kWarning, 60) << device_ << " port " << int{port_}
                                      << ": ibv_query_port failed (errno " << errno
                                      << "); keeping its last known state";
    return;
  }
  Set(*state == IBV_PORT_ACTIVE, *state);
}

void PortWatch::DrainEvents() {
  ibv_async_event event{};
  while (ibv_get_async_event(context_, &event) == 0) {
    const std::optional<bool> activity = PortEventActivity(event, port_);
    if (activity) {
      // The event says which way the port went; the state name comes from a query when it
      // agrees (the port may have moved on already, and the next query settles that).
      const std::optional<ibv_port_state> now = QueryState();
      ibv_port_state state = *activity ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
      if (now && (*now == IBV_PORT_ACTIVE) == *activity) state = *now;
      if (event.event_type == IBV_EVENT_DEVICE_FATAL) {
        GDR_LOG(kError) << device_
                        << ": the device reported a fatal error (IBV_EVENT_DEVICE_FATAL)";
      }
      Set(*activity, state);
    } else {
      // Each other kind is worth one line (a QP error is also seen in its completions); a
      // storm of them must not fill the log.
      const auto type = static_cast<uint32_t>(event.event_type);
      const bool first = type >= 32 || (logged_events_ & (1u << type)) == 0;
      if (type < 32) logged_events_ |= 1u << type;
      if (first) {
        GDR_LOG(kInfo) << device_ << ": async event " << ibv_event_type_str(event.event_type)
                       << " (further ones of this kind at debug level)";
      } else {
        GDR_LOG(kDebug) << device_ << ": async event " << ibv_event_type_str(event.event_type);
      }
    }
    ibv_ack_async_event(&event);
  }
}

void PortWatch::Loop() {
  SetThreadName(absl::StrCat("gdr-port-", device_).c_str());
  int64_t last_query = absl::GetCurrentTimeNanos();
  const int64_t requery_ns = absl::ToInt64Nanoseconds(kRequery);
  bool events_readable = true;  // false once the async fd reports an error: queries only
  while (!stop_.load(std::memory_order_acquire)) {
    last_loop_ns_.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed);
    pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {context_->async_fd, POLLIN, 0}};
    const int r = ::poll(fds, events_readable ? 2 : 1,
                         static_cast<int>(absl::ToInt64Milliseconds(kRequery)));
    if (stop_.load(std::memory_order_acquire)) break;
    if (r < 0 && errno != EINTR) {
      GDR_LOG_EVERY_N_SEC(kError, 60) << device_ << ": poll on the async event fd failed (errno "
                                      << errno << ")";
      absl::SleepFor(absl::Milliseconds(100));  // never a busy loop on a broken fd
    }
    if (r > 0 && events_readable) {
      if ((fds[1].revents & POLLIN) != 0) {
        DrainEvents();
      } else if ((fds[1].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
        GDR_LOG(kError) << device_ << ": its async event fd failed (revents " << fds[1].revents
                        << "); the port is watched by queries alone from now on";
        events_readable = false;
      }
    }
    // Also while events keep coming: a port change the device never reported still shows.
    const int64_t now = absl::GetCurrentTimeNanos();
    if (r == 0 || now - last_query >= requery_ns) {
      Requery();
      last_query = now;
    }
  }
}

}  // namespace gdr::verbs
