// The supervisor loop gdrstored and gdragent share once they serve: READY=1, the health
// monitor behind systemd's watchdog, and the signals the main thread takes (SIGHUP: reload,
// SIGTERM/SIGINT: stop) until the one that stops the service.
#pragma once

#include <signal.h>

#include <functional>
#include <string>

#include "common/process/health_monitor.h"
#include "common/process/systemd_notifier.h"

namespace gdr {

struct ServiceLoop {
  const SystemdNotifier* notifier = nullptr;  // must outlive the loop
  std::function<std::string()> status_line;   // every STATUS= line
  // SIGHUP: applies the configuration again, between RELOADING=1 and READY=1. Empty: the
  // service has nothing to reload; `no_reload` is logged instead.
  std::function<void()> reload;
  std::string no_reload;
};

// Sends READY=1 with the status line, runs `monitor` (its probes built, not started) while
// systemd listens, and takes `signals` (blocked in every thread: sigwait takes them here) until
// SIGTERM or SIGINT, which it returns after stopping the monitor.
int ServeUntilStopSignal(const ServiceLoop& loop, HealthMonitor* monitor,
                         const sigset_t& signals);

// "SIGTERM", "SIGINT", "SIGHUP", or "signal N".
std::string SignalName(int sig);

}  // namespace gdr
