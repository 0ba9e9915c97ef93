// SIGHUP: what a re-read configuration changes. Admission limits, log level, per-volume media
// timing, fault rules of the configuration (--fault), the drain timeout, the accepted tokens
// (the token file is read again) and the TLS certificate files (read again; TlsReloader) apply
// live; switching TLS on or off does not;
// volumes added to or removed from the configuration (--volume, the files of a --volume-dir)
// are made or deleted live through the volume catalog (the supervisor applies
// volumes_added / volumes_removed), a volume's file never deleted;
// everything that shapes sockets, memory or the initiator pools (listen address, a kept
// volume's size/file, chunk size, pool sizes, timeouts of the tcp links, the rc device and QP
// settings, the dc mode, DCI and address-handle settings, the local socket and its admission rule and
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
  // Its volumes are `current`'s until the supervisor has made and deleted those below: it adds
  // each volume made and drops each one deleted.
  DaemonConfig effective;
  // Volumes of `next` that `current` lacks, in name order: to be made (VolumeCatalog).
  std::vector<VolumeSpec> volumes_added;
  // Volumes of `current` that `next` lacks, in name order: to be deleted, their files kept.
  std::vector<std::string> volumes_removed;
};

// Pure: compares the running configuration with a freshly parsed one.
ReloadPlan PlanReload(const DaemonConfig& current, const DaemonConfig& next);

}  // namespace gdr
