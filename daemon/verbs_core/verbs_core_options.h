// The verbs core's settings as plain values (the device to open and how its completions are
// polled), filled in by the daemon's configuration and compared by reload.
#pragma once

#include "common/verbs/completion_poller.h"
#include "common/verbs/verbs_device.h"

namespace gdr {

struct VerbsCoreOptions {
  verbs::DeviceSelector device;
  verbs::PollerOptions poller;
};

}  // namespace gdr
