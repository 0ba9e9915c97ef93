// Registration of client memory on a verbs device's PD for the daemon's one-sided reads and
// writes: what the rc and dc transports share (host memory with ibv_reg_mr, GPU memory with
// dma-buf first and nvidia-peermem second).
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "client/src/transport/region.h"
#include "common/verbs/verbs_device.h"

namespace gdr {

// Registers `region` on `device`'s PD and sets its rkey; the MR is deregistered when the region
// is released, before its memory is freed. `owner` keeps the device (its PD) alive until then.
// The MR's error for host memory; for GPU memory FAILED_PRECONDITION naming what is missing.
absl::Status RegisterOnDevice(const verbs::VerbsDevice& device,
                              std::shared_ptr<const void> owner, Region& region);

}  // namespace gdr
