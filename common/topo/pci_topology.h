// Where RDMA NICs and GPUs sit on the PCIe tree, read from sysfs, and how close each GPU is to
// each NIC (same switch / same root port / same host bridge / same NUMA node / across sockets).
// Used by `gdrctl topo` and by the client library to rank its rails for a GPU. `sysfs_root` is
// "/sys" in production and a small fake tree in tests.
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
  // RDMA devices with no PCI parent (rxe, siw), sorted: they exist but sit nowhere on the tree.
  std::vector<std::string> off_tree_nics;
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

// One candidate NIC as seen from a GPU.
struct NicRank {
  std::string name;                              // as the caller named it
  const Nic* nic = nullptr;                      // into the Topology; null: unknown
  Relation relation = Relation::kAcrossSockets;  // to the GPU; meaningful when known
  int hops = 0;                                  // to the GPU; meaningful when known
  // False for a name not on the PCI tree (a software device such as rxe0, or no such device)
  // and for every name when the GPU is not on the tree: nothing says where it sits.
  bool known() const { return nic != nullptr; }
};

// Orders `nic_names` (the rails a client may use) for the GPU at `gpu_pci` (canonical
// address): closest relation first, then fewer hops, then the order given; unknown names last,
// in the order given. One entry per name given; each `nic` points into `topo`. Pure: safe from
// any thread. The only ranking of NICs: NearestNic, ChooseNic and `gdrctl topo` go through it,
// and a client choosing among its rails should too.
std::vector<NicRank> RankNics(const Topology& topo, absl::string_view gpu_pci,
                              const std::vector<std::string>& nic_names);

// The first of RankNics, and why it may be a poor one.
struct NicChoice {
  NicRank rank;
  // Set only when the choice is a known NIC across sockets (or with no NUMA node to tell):
  // names the GPU, its node, the NIC, and a nearer NIC of the tree left out of `nic_names`.
  std::string warning;
};

// NOT_FOUND when no GPU at `gpu_pci` is on the tree; INVALID_ARGUMENT when `nic_names` is
// empty. A choice of an unknown NIC (no candidate is on the tree) is OK, with no warning.
absl::StatusOr<NicChoice> ChooseNic(const Topology& topo, absl::string_view gpu_pci,
                                    const std::vector<std::string>& nic_names);

// The NIC nearest the GPU at `gpu_pci` among all of the tree's NICs (ChooseNic over
// `topo.nics`). NOT_FOUND when no such GPU is in the tree or there is no NIC. Ties go to the
// NIC with fewer hops, then the lower name.
absl::StatusOr<const Nic*> NearestNic(const Topology& topo, absl::string_view gpu_pci);

// Every RDMA device of the tree by name: those on the PCI tree, then the off-tree ones (what
// `gdrctl topo` takes as the rails when none are named).
std::vector<std::string> AllNicNames(const Topology& topo);

// The human-readable report of `gdrctl topo`, and its JSON form, for a client whose rails are
// `rails` (the NICs each GPU's rail is chosen from; ChooseNic's warnings are part of both).
std::string FormatTopology(const Topology& topo, const std::vector<std::string>& rails);
std::string TopologyJson(const Topology& topo, const std::vector<std::string>& rails);

}  // namespace gdr::topo
