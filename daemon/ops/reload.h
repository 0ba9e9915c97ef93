// SIGHUP: what a re-read configuration changes. Admission limits, log level, per-volume media
// timing, fault rules of the configuration (--fault), the drain timeout, the accepted tokens
// (the token file is read again) and the TLS certificate files (read again; TlsReloader) apply
// live; switching TLS on or off does not;
// everything that shapes sockets, memory or the initiator pools (listen address, volumes'
// size/file, chunk size, pool sizes, timeouts of the tcp links, the rc device and QP settings,
// the dc mode, DCI and address-handle settings, the local socket and its admission rule and
// copy threads) needs a restart and is reported, not applied.
#pragma once

#include <string>
#include <vector>

#include "daemon/ops/daemon_config.h"

namespace gdr {

struct ReloadPlan {
  std::vector<std::string> applied;       // "max-op-size: 256 MiB -> 1 MiB"
  std::vector<std::string> needs_restart; // "listen: 127.0.0.1:50051 -> 0.0.0.0:50051"
  // `current` with every live-applicable setting taken from `next`: what runs after the reload.
  DaemonConfig effective;
};

// Pure: compares the running configuration with a freshly parsed one.
ReloadPlan PlanReload(const DaemonConfig& current, const DaemonConfig& next);

}  // namespace gdr
