// Which allocations a GPU address range lies in, and whether they can be handed to another
// process as one region: one cudaMalloc allocation (one CUDA IPC handle names it), or VMM
// allocations mapped side by side (PyTorch's expandable segments map a tensor's memory in
// chunks), each with a descriptor of its own that the receiver maps at the same offsets. The
// walk is kept apart from the driver so that its rules are tested on hosts without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gdr::cuda {

enum class AllocationKind { kCudaMalloc, kVmm };

// "cudaMalloc memory" / "a VMM allocation": what a refusal names.
const char* AllocationKindName(AllocationKind kind);

struct AllocationAt {
  AllocationKind kind = AllocationKind::kCudaMalloc;
  uint64_t base = 0;  // the allocation's first byte (VMM: of its mapping)
  uint64_t size = 0;
  int ordinal = -1;  // the GPU it lives on
};

// What holds `address`; an error (INVALID_ARGUMENT) when nothing the driver knows does.
using FindAllocation = std::function<absl::StatusOr<AllocationAt>(uint64_t address)>;

// The allocations [ptr, ptr + n) lies in, in address order, each as `find` says. INVALID_ARGUMENT
// for n == 0 or a range that wraps; one that runs into memory no allocation holds (naming the
// address), that spans two cudaMalloc allocations (an IPC handle names one), allocations of
// two kinds (naming both) or of two GPUs; and an answer of `find` that does not hold the
// address it was asked about. RESOURCE_EXHAUSTED past `max_chunks` allocations.
absl::StatusOr<std::vector<AllocationAt>> AllocationsOfRange(uint64_t ptr, uint64_t n,
                                                             const FindAllocation& find,
                                                             size_t max_chunks);

}  // namespace gdr::cuda
