// The CPUs of a NUMA node, from <sysfs_root>/devices/system/node/nodeN/cpulist, so a thread that
// serves one device (a rail's completion poller) can run next to the device's memory and PCIe
// root. `sysfs_root` is "/sys" in production and a small fake tree in tests.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr::topo {

// "0-3,8,10-11" -> {0,1,2,3,8,10,11} (sorted, each once). INVALID_ARGUMENT naming the piece
// that is not a number or a low-high range; an empty list is empty.
absl::StatusOr<std::vector<int>> ParseCpuList(absl::string_view text);

// {0,1,2,3,8,10,11} -> "0-3,8,10-11" (the kernel's form, for logs); "" for none.
std::string FormatCpuList(const std::vector<int>& cpus);

// The CPUs of node `node`. NOT_FOUND when the node has no cpulist (no such node, no NUMA in the
// kernel); INVALID_ARGUMENT when the file does not parse; an empty list for a node without CPUs
// (memory only).
absl::StatusOr<std::vector<int>> NumaNodeCpus(const std::string& sysfs_root, int node);

}  // namespace gdr::topo
