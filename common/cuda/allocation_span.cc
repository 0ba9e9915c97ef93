#include "common/cuda/allocation_span.h"

#include "absl/strings/str_cat.h"

namespace gdr::cuda {
namespace {

std::string Hex(uint64_t v) { return absl::StrCat("0x", absl::Hex(v)); }

std::string Describe(const AllocationAt& a) {
  return absl::StrCat(AllocationKindName(a.kind), " [", Hex(a.base), ", +", a.size, ") on GPU ",
                      a.ordinal);
}

}  // namespace

const char* AllocationKindName(AllocationKind kind) {
  switch (kind) {
    case AllocationKind::kCudaMalloc:
      return "cudaMalloc memory";
    case AllocationKind::kVmm:
      return "a VMM allocation";
  }
  return "unknown memory";
}

absl::StatusOr<std::vector<AllocationAt>> AllocationsOfRange(uint64_t ptr, uint64_t n,
                                                             const FindAllocation& find,
                                                             size_t max_chunks) {
  const std::string range = absl::StrCat("GPU range [", Hex(ptr), ", +", n, ")");
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(range, ": size 0"));
  if (ptr + n < ptr) {
    return absl::InvalidArgumentError(absl::StrCat(range, ": wraps around the address space"));
  }
  const uint64_t end = ptr + n;
  std::vector<AllocationAt> out;
  for (uint64_t at = ptr; at < end;) {
    absl::StatusOr<AllocationAt> a = find(at);
    if (!a.ok()) {
      if (out.empty()) return a.status();
      return absl::InvalidArgumentError(absl::StrCat(
          range, " runs past the end of ", Describe(out.back()), " into ", Hex(at),
          ", which no allocation holds: ", a.status().message()));
    }
    if (a->size == 0 || at < a->base || at - a->base >= a->size) {
      return absl::InvalidArgumentError(absl::StrCat(
          range, ": the driver's allocation for ", Hex(at), " is [", Hex(a->base), ", +",
          a->size, "), which does not hold it"));
    }
    if (!out.empty()) {
      const AllocationAt& prev = out.back();
      if (a->kind != prev.kind) {
        return absl::InvalidArgumentError(absl::StrCat(
            range, " spans allocations of two kinds: ", Describe(prev), " and then ",
            Describe(*a), "; register each allocation's part on its own"));
      }
      if (a->kind == AllocationKind::kCudaMalloc) {
        return absl::InvalidArgumentError(absl::StrCat(
            range, " spans two cudaMalloc allocations, ", Describe(prev), " and ", Describe(*a),
            ": a CUDA IPC handle names one allocation; register each part on its own"));
      }
      if (a->ordinal != prev.ordinal) {
        return absl::InvalidArgumentError(absl::StrCat(
            range, " spans allocations on two GPUs: ", Describe(prev), " and ", Describe(*a)));
      }
    }
    if (out.size() == max_chunks) {
      return absl::ResourceExhaustedError(absl::StrCat(
          range, " spans more than ", max_chunks, " VMM allocations, the most one region may "
          "be handed over from; register it in parts"));
    }
    out.push_back(*a);
    // Safe: at lies inside [base, base + size), and base + size is the allocation's end.
    const uint64_t next = a->base + a->size;
    if (next <= at) {
      return absl::InvalidArgumentError(absl::StrCat(
          range, ": the driver's allocation [", Hex(a->base), ", +", a->size, ") wraps"));
    }
    at = next;
  }
  return out;
}

}  // namespace gdr::cuda
