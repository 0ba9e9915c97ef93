// Where RDMA NICs and GPUs sit on the PCIe tree, read from sysfs, and how close each GPU is to
// each NIC (same switch / same root port / same host bridge / same NUMA node / across sockets).
// Used by `gdrctl topo` and by the client library to pick the NIC nearest a GPU. `sysfs_root`
// is "/sys" in production and a small fake tree in tests.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr::topo {

struct PciNode {
  std::string address;              // "0000:03:00.0"
  std::string host_bridge;          // "pci0000:00"
  std::vector<std::string> bridges; // root port first, down to the device's parent bridge
  int numa_node = -1;               // -1: unknown
  std::string path() const;         // "pci0000:00/0000:00:01.0/.../0000:03:00.0"
};

struct Nic {
  std::string name;  // "mlx5_0"
  PciNode pci;
};

struct Gpu {
  PciNode pci;
  std::string device_id;  // PCI device id, e.g. "0x2330"
};

struct Topology {
  std::vector<Nic> nics;  // sorted by name
  std::vector<Gpu> gpus;  // sorted by PCI address
};

// Closest first; the order is the preference when picking a NIC.
enum class Relation {
  kSameSwitch = 0,     // share a PCIe switch below the root port (nvidia-smi PIX/PXB)
  kSameRootPort = 1,   // meet at the CPU's root port
  kSameHostBridge = 2, // same root complex, different root ports (PHB)
  kSameNumaNode = 3,   // different root complexes, same NUMA node (NODE)
  kAcrossSockets = 4,  // different NUMA nodes, or unknown (SYS)
};
const char* RelationName(Relation r);   // "same switch"
const char* RelationShort(Relation r);  // "PIX", "PXB"... style: "SW", "RP", "HB", "NODE", "SYS"

// Reads <sysfs_root>/class/infiniband/* (NICs) and <sysfs_root>/bus/pci/devices/* with NVIDIA's
// vendor id and a display/3D class (GPUs). NOT_FOUND when sysfs_root has neither directory.
absl::StatusOr<Topology> ReadTopology(const std::string& sysfs_root);

Relation Relate(const PciNode& a, const PciNode& b);

// PCIe hops between two devices through their deepest shared bridge (tie-break within a
// relation).
int Hops(const PciNode& a, const PciNode& b);

// The NIC nearest the GPU at `gpu_pci` (canonical address). NOT_FOUND when no such GPU is in
// the tree or there is no NIC. Ties go to the NIC with fewer hops, then the lower name.
absl::StatusOr<const Nic*> NearestNic(const Topology& topo, absl::string_view gpu_pci);

// The human-readable report of `gdrctl topo`, and its JSON form.
std::string FormatTopology(const Topology& topo);
std::string TopologyJson(const Topology& topo);

}  // namespace gdr::topo
