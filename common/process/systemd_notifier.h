// A service's side of systemd's notification protocol (sd_notify, libsystemd): READY,
// RELOADING, STOPPING, STATUS and WATCHDOG messages on $NOTIFY_SOCKET. Without NOTIFY_SOCKET
// (not started by systemd) every call is a cheap no-op, so a service runs the same either way.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gdr {

class SystemdNotifier {
 public:
  // Reads NOTIFY_SOCKET and WATCHDOG_USEC/WATCHDOG_PID once; the environment is left as it is
  // (children the daemon never starts would not need it anyway). Thread-safe after creation.
  static std::unique_ptr<SystemdNotifier> FromEnvironment();

  // True when systemd (or something playing it) listens on NOTIFY_SOCKET.
  bool enabled() const { return enabled_; }
  // The watchdog timeout systemd enforces (WatchdogSec=), zero when the watchdog is off or
  // meant for another process (WATCHDOG_PID).
  absl::Duration watchdog_timeout() const { return watchdog_timeout_; }

  // Sends `state` (newline-separated VAR=value assignments) as one datagram. OK when not
  // enabled; UNAVAILABLE with the errno text when the socket refuses it.
  absl::Status Notify(absl::string_view state) const;

  // Convenience wrappers; failures are logged (rate-limited), never fatal.
  void Ready(absl::string_view status) const;
  void Reloading() const;  // RELOADING=1 plus MONOTONIC_USEC (systemd >= 253 wants it)
  void Stopping(absl::string_view status) const;
  void Status(absl::string_view status) const;
  void WatchdogPing(absl::string_view status) const;

 private:
  SystemdNotifier(bool enabled, absl::Duration watchdog)
      : enabled_(enabled), watchdog_timeout_(watchdog) {}
  void Send(const std::string& state) const;
  const bool enabled_;
  const absl::Duration watchdog_timeout_;
};

// A STATUS= value must be one line: newlines become spaces.
std::string OneLine(absl::string_view text);

}  // namespace gdr
