// Liveness of a service (gdrstored, gdragent) as systemd's watchdog sees it. A thread runs
// every probe (the daemon's transport threads and media delay queue, a real in-process gRPC
// call in both) once per period and sends WATCHDOG=1 with a fresh STATUS= line only when all of
// them pass: a stuck completion poller or a wedged gRPC executor stops the pings, and systemd
// restarts the service.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/process/systemd_notifier.h"

namespace gdr {

// A loop's "I am alive" mark: the loop calls Beat() every iteration; a probe compares Age()
// against a bound. Lock-free; any thread.
class Heartbeat {
 public:
  Heartbeat() { Beat(); }
  void Beat() { last_ns_.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed); }
  absl::Duration Age() const {
    return absl::Nanoseconds(absl::GetCurrentTimeNanos() -
                             last_ns_.load(std::memory_order_relaxed));
  }

 private:
  std::atomic<int64_t> last_ns_{0};
};

class HealthMonitor {
 public:
  using Probe = std::function<absl::Status()>;
  // `notifier` must outlive the monitor. `period`: time between rounds (half the watchdog
  // timeout under a watchdog). `status_line` builds the STATUS= text for each round.
  HealthMonitor(const SystemdNotifier* notifier, absl::Duration period,
                std::function<std::string()> status_line);
  // The period for `notifier`: half the watchdog timeout under a watchdog (sd_watchdog_enabled
  // (3)), else 5 s, to keep STATUS= fresh for `systemctl status`.
  static absl::Duration PeriodFor(const SystemdNotifier& notifier);
  ~HealthMonitor();  // Stop()

  // Adds a probe; before Start only. A probe returns OK when its component is alive, else a
  // status whose message says what is stuck. Probes run on the monitor thread.
  void AddProbe(std::string name, Probe probe);

  // Starts the monitor thread; the first round runs at once.
  void Start();
  // Stops and joins; no WATCHDOG=1 is sent after it returns. Idempotent.
  void Stop();

  // Runs every probe now; OK or the first failure, prefixed with the probe's name.
  absl::Status CheckOnce();

  uint64_t pings_sent() const { return pings_.load(); }
  uint64_t failed_rounds() const { return failed_.load(); }

 private:
  void Loop();

  const SystemdNotifier* notifier_;
  const absl::Duration period_;
  std::function<std::string()> status_line_;
  std::vector<std::pair<std::string, Probe>> probes_;
  std::atomic<uint64_t> pings_{0};
  std::atomic<uint64_t> failed_{0};
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace gdr
