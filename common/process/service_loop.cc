#include "common/process/service_loop.h"

#include "absl/strings/str_cat.h"
#include "common/base/log.h"

namespace gdr {

int ServeUntilStopSignal(const ServiceLoop& loop, HealthMonitor* monitor,
                         const sigset_t& signals) {
  const SystemdNotifier& notifier = *loop.notifier;
  notifier.Ready(loop.status_line());
  if (notifier.enabled()) {
    const absl::Duration watchdog = notifier.watchdog_timeout();
    GDR_LOG(kInfo) << "told systemd READY=1"
                   << (watchdog > absl::ZeroDuration()
                           ? absl::StrCat("; watchdog every ",
                                          absl::FormatDuration(HealthMonitor::PeriodFor(notifier)),
                                          " (timeout ", absl::FormatDuration(watchdog), ")")
                           : std::string("; no watchdog"));
    monitor->Start();
  }
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) {
      monitor->Stop();
      return sig;
    }
    if (!loop.reload) {
      GDR_LOG(kInfo) << loop.no_reload;
      continue;
    }
    notifier.Reloading();
    loop.reload();
    notifier.Ready(loop.status_line());
  }
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    default: return absl::StrCat("signal ", sig);
  }
}

}  // namespace gdr
