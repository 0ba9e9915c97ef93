// Watches one port of an opened device: a thread reads the device's async events
// (IBV_EVENT_PORT_ERR / IBV_EVENT_PORT_ACTIVE for the port) and, once a second, queries the port
// again so that an event missed or never sent still shows. It keeps whether the port is ACTIVE
// and tells its owner on every change, so a rail can stop taking work while its link is down
// and take it again when the link comes back, without a restart.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace gdr::verbs {

// What an async event says about port `port`: true (it became ACTIVE), false (it left ACTIVE,
// or the whole device failed), nullopt (nothing about this port's activity).
std::optional<bool> PortEventActivity(const ibv_async_event& event, uint8_t port);

class PortWatch {
 public:
  // Runs on the watch thread on every change of activity (never twice with the same `active`),
  // with the port's state as last seen (DOWN, INIT, ARMED, ACTIVE...). Must not block long.
  using OnChange = std::function<void(bool active, ibv_port_state state)>;

  // Queries the port once (its state then is the starting point; no OnChange for it), makes the
  // context's async fd non-blocking and starts the thread. The errno status of the failing call.
  // `context` must outlive the watch; nothing else may read the context's async events.
  static absl::StatusOr<std::unique_ptr<PortWatch>> Start(ibv_context* context, uint8_t port,
                                                          std::string device,
                                                          OnChange on_change);
  // Stop().
  ~PortWatch();
  PortWatch(const PortWatch&) = delete;
  PortWatch& operator=(const PortWatch&) = delete;

  // Ends the thread (at most one poll timeout late). Idempotent; not from OnChange.
  void Stop();

  // Thread-safe.
  bool active() const { return active_.load(std::memory_order_acquire); }
  ibv_port_state state() const { return state_.load(std::memory_order_acquire); }
  // Whether the thread has come round within `max_age` (it wakes at least every
  // kRequery, so a `max_age` below twice that is raised to it).
  bool Healthy(absl::Duration max_age) const;
  absl::Duration since_last_loop() const;

  // How often the port is queried again while no event comes.
  static constexpr absl::Duration kRequery = absl::Seconds(1);

 private:
  PortWatch(ibv_context* context, uint8_t port, std::string device, OnChange on_change)
      : context_(context),
        port_(port),
        device_(std::move(device)),
        on_change_(std::move(on_change)) {}
  void Loop();
  void DrainEvents();
  void Requery();
  // Records `active` / `state` and calls on_change_ when activity changed.
  void Set(bool active, ibv_port_state state);
  // ibv_query_port's state, or nullopt when the query fails (the device may be gone).
  std::optional<ibv_port_state> QueryState() const;

  ibv_context* const context_;
  const uint8_t port_;
  const std::string device_;
  const OnChange on_change_;
  int stop_fd_ = -1;
  std::atomic<bool> active_{false};
  std::atomic<ibv_port_state> state_{IBV_PORT_NOP};
  std::atomic<int64_t> last_loop_ns_{0};
  std::atomic<bool> stop_{false};
  uint32_t logged_events_ = 0;  // watch thread only: a bit per event type already logged
  std::thread thread_;
};

}  // namespace gdr::verbs
