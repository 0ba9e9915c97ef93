#include "common/process/systemd_notifier.h"

#include <systemd/sd-daemon.h>
#include <time.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"

namespace gdr {

std::string OneLine(absl::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  return out;
}

std::unique_ptr<SystemdNotifier> SystemdNotifier::FromEnvironment() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  const bool enabled = socket != nullptr && *socket != '\0';
  uint64_t usec = 0;
  // > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID (if set) is this process.
  absl::Duration watchdog = absl::ZeroDuration();
  if (enabled && sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog = absl::Microseconds(static_cast<int64_t>(usec));
  }
  return std::unique_ptr<SystemdNotifier>(new SystemdNotifier(enabled, watchdog));
}

absl::Status SystemdNotifier::Notify(absl::string_view state) const {
  if (!enabled_) return absl::OkStatus();
  const std::string s(state);
  const int r = sd_notify(0, s.c_str());
  if (r < 0) {
    return absl::UnavailableError(absl::StrCat("sd_notify: ", std::strerror(-r)));
  }
  return absl::OkStatus();
}

void SystemdNotifier::Send(const std::string& state) const {
  absl::Status s = Notify(state);
  if (!s.ok()) {
    GDR_LOG_EVERY_N_SEC(kWarning, 10) << "cannot notify systemd: " << s.message();
  }
}

void SystemdNotifier::Ready(absl::string_view status) const {
  Send(absl::StrCat("READY=1\nSTATUS=", OneLine(status)));
}

void SystemdNotifier::Reloading() const {
  struct timespec ts {};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const uint64_t usec = static_cast<uint64_t>(ts.tv_sec) * 1000000u + ts.tv_nsec / 1000;
  Send(absl::StrCat("RELOADING=1\nMONOTONIC_USEC=", usec, "\nSTATUS=reloading configuration"));
}

void SystemdNotifier::Stopping(absl::string_view status) const {
  Send(absl::StrCat("STOPPING=1\nSTATUS=", OneLine(status)));
}

void SystemdNotifier::Status(absl::string_view status) const {
  Send(absl::StrCat("STATUS=", OneLine(status)));
}

void SystemdNotifier::WatchdogPing(absl::string_view status) const {
  Send(absl::StrCat("WATCHDOG=1\nSTATUS=", OneLine(status)));
}

}  // namespace gdr
