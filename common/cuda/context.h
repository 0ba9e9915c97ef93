// Makes a GPU's primary context current on the calling thread. Private to common/cuda.
#pragma once

#include "absl/status/status.h"
#include "common/cuda/cuda_api.h"

namespace gdr::cuda {

// Retains the primary context of `ordinal` (once per process; never released) and makes it
// current on this thread. Thread-safe.
absl::Status UseDevice(const CudaApi& api, int ordinal);

}  // namespace gdr::cuda
