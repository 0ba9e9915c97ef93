// The verbs core's settings as plain values (the rails to open and how their completions are
// polled), filled in by the daemon's configuration and compared by reload.
#pragma once

#include <string>
#include <vector>

#include "common/verbs/completion_poller.h"
#include "common/verbs/verbs_device.h"

namespace gdr {

struct VerbsCoreOptions {
  // The rails in order, one RDMA device each (--rdma-device, repeatable and comma-separated).
  // Always at least one: {""} when none is named, the automatic device (the first ACTIVE port,
  // or --rdma-addr's).
  std::vector<std::string> rails = {""};
  // Port, GID index, address and sysfs root, the same for every rail. `device.device` is left
  // empty: each rail's name comes from `rails`.
  verbs::DeviceSelector device;
  verbs::PollerOptions poller;

  // Whether a device was named by name or by address (naming one makes failing to open it fatal).
  bool NamesDevice() const {
    return rails.size() > 1 || (!rails.empty() && !rails.front().empty()) ||
           !device.address.empty();
  }
};

}  // namespace gdr
