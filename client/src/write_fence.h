// Ops that write into caller memory through a NIC (gets on rc/dc) are reported done only after
// that memory's write fence: for GPU memory whose GPU does not order NIC writes itself, the
// GPUDirect RDMA flush (common/cuda/gpu_direct.h). Host memory and tcp need none.
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "gdrstore/types.h"

namespace gdr {

// `done`, preceded on success by `fence` (when set). A failed fence fails the op with the
// fence's status: the bytes arrived but later GPU work might not see them yet.
gdrstore::OpCallback AfterWriteFence(std::function<absl::Status()> fence,
                                     gdrstore::OpCallback done);

}  // namespace gdr
