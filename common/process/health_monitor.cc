#include "common/process/health_monitor.h"

#include "absl/strings/str_cat.h"
#include "common/base/log.h"

namespace gdr {

HealthMonitor::HealthMonitor(const SystemdNotifier* notifier, absl::Duration period,
                             std::function<std::string()> status_line)
    : notifier_(notifier), period_(period), status_line_(std::move(status_line)) {}

HealthMonitor::~HealthMonitor() { Stop(); }

absl::Duration HealthMonitor::PeriodFor(const SystemdNotifier& notifier) {
  const absl::Duration watchdog = notifier.watchdog_timeout();
  return watchdog > absl::ZeroDuration() ? watchdog / 2 : absl::Seconds(5);
}

void HealthMonitor::AddProbe(std::string name, Probe probe) {
  probes_.emplace_back(std::move(name), std::move(probe));
}

void HealthMonitor::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void HealthMonitor::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

absl::Status HealthMonitor::CheckOnce() {
  for (auto& [name, probe] : probes_) {
    absl::Status s = probe();
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(name, ": ", s.message()));
  }
  return absl::OkStatus();
}

void HealthMonitor::Loop() {
  bool was_healthy = true;
  // Rounds start at a fixed cadence, so a slow probe does not stretch the ping interval.
  absl::Time next = absl::Now();
  do {
    next += period_;
    absl::Status s = CheckOnce();
    if (stop_.HasBeenNotified()) break;
    const std::string status = status_line_ ? status_line_() : std::string();
    if (s.ok()) {
      if (!was_healthy) GDR_LOG(kWarning) << "health: all probes pass again; watchdog resumed";
      was_healthy = true;
      if (notifier_->watchdog_timeout() > absl::ZeroDuration()) {
        notifier_->WatchdogPing(status);
        pings_.fetch_add(1);
      } else {
        notifier_->Status(status);
      }
    } else {
      failed_.fetch_add(1);
      // No WATCHDOG=1: systemd acts when the timeout passes without one.
      GDR_LOG_EVERY_N_SEC(kError, 5) << "health: " << s.message()
                                     << "; withholding the systemd watchdog ping";
      was_healthy = false;
      notifier_->Status(absl::StrCat("UNHEALTHY: ", s.message()));
    }
    if (next < absl::Now()) next = absl::Now();  // fell behind: do not burst to catch up
  } while (!stop_.WaitForNotificationWithDeadline(next));
}

}  // namespace gdr
