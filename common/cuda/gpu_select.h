// Naming a GPU: a full PCI address ("0000:b7:00.0"), the short form without the domain
// ("b7:00.0", domain 0), or a CUDA ordinal ("3"). Pure functions, no driver needed: the list of
// GPUs present is passed in, so the rules are testable anywhere.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/cuda/gpu.h"

namespace gdr::cuda {

// Canonical lowercase "DDDD:BB:DD.F" for a full or short PCI address; INVALID_ARGUMENT naming
// the accepted forms otherwise (fields range-checked: bus <= ff, device <= 1f, function <= 7).
absl::StatusOr<std::string> CanonicalPciAddress(absl::string_view text);

// OK when `spec` is well formed (an ordinal or a PCI address); INVALID_ARGUMENT naming the
// accepted forms otherwise. Needs no driver.
absl::Status ValidateGpuSpec(absl::string_view spec);

// The GPU `spec` names among `gpus`. INVALID_ARGUMENT for a malformed spec, NOT_FOUND listing
// every GPU present (ordinal, PCI address, name) when none matches.
absl::StatusOr<GpuInfo> ResolveGpu(absl::string_view spec, const std::vector<GpuInfo>& gpus);

// "0 0000:b7:00.0 NVIDIA H100; 1 ..." for error messages.
std::string DescribeGpus(const std::vector<GpuInfo>& gpus);

}  // namespace gdr::cuda
