// What `gdrctl doctor` reads from files: sysfs (RDMA devices, ports, GIDs, netdev MTUs, PCIe
// placement, IOMMU groups, ACS, BARs, kernel modules) and procfs (kernel release, the NVIDIA
// driver's version line, ARP sysctls), under roots that tests point at a fake tree. Plain
// structs, no judgement: checks.h decides what is good.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/gdrctl/doctor/pci_config.h"
#include "common/topo/pci_topology.h"

namespace gdrctl::doctor {

struct GidFact {
  int index = 0;
  std::string gid;     // sysfs text form
  std::string type;    // "RoCE v2", "IB/RoCE v1"
  std::string netdev;  // empty on InfiniBand
  std::string ipv4;    // the address of an IPv4-mapped GID, else empty
};

struct PortFact {
  int port = 0;
  std::string state;       // "ACTIVE" (sysfs "4: ACTIVE" without the number)
  std::string phys_state;  // "LinkUp"
  std::string link_layer;  // "Ethernet", "InfiniBand"
  std::vector<GidFact> gids;  // non-zero entries
  std::string netdev;      // the port's interface (from the GID table, else device/net/)
  int netdev_mtu = 0;      // class/net/<netdev>/mtu; 0 when unknown
};

struct RdmaDeviceFact {
  std::string name;        // "mlx5_0"
  std::string pci;         // "" for a software device (rxe, siw)
  std::string driver;      // PCI driver ("mlx5_core"), or "" when there is no PCI parent
  std::string fw_ver;
  std::string physfn;      // the PF's address when this is an SR-IOV VF, else ""
  std::vector<PortFact> ports;
};

struct PciDeviceFact {
  std::string address;
  // iommu_group/type: "identity", "DMA", "DMA-FQ", ...; "" when the device has no IOMMU group.
  std::string iommu_type;
  bool has_iommu_group = false;
  uint64_t bar1_bytes = 0;  // resource line 1 (a GPU's BAR1); 0 when absent
  // ACS of this device's config space; nullopt when config holds too little to say.
  std::optional<AcsState> acs;
  size_t config_bytes = 0;  // how much of config was readable
};

struct ArpSysctls {
  int arp_ignore = -1;    // max(conf/all, conf/<if>), as the kernel applies it; -1 unreadable
  int arp_announce = -1;
};

struct NetdevFact {
  std::string name;
  std::vector<std::string> ipv4;  // from the RoCE GID tables: addresses RDMA can use
  ArpSysctls arp;
};

struct HostFacts {
  std::string sysfs_root;
  std::string proc_root;
  std::vector<RdmaDeviceFact> rdma;  // sorted by name
  gdr::topo::Topology topo;          // NICs and GPUs with PCIe paths (empty if unreadable)
  std::string topo_error;            // why topo is empty, when it is
  // GPUs, NICs and every bridge between them, by address.
  std::vector<PciDeviceFact> pci;
  std::vector<NetdevFact> rdma_netdevs;  // interfaces behind RDMA ports, sorted by name
  bool module_nvidia = false;
  bool module_nvidia_peermem = false;
  bool peer_memory_api = false;  // kallsyms has ib_register_peer_memory_client (MOFED's ib_core)
  std::string kernel_release;         // proc/sys/kernel/osrelease
  std::string nvidia_driver;          // first line of proc/driver/nvidia/version, "" when absent
  bool nvidia_open_module = false;    // that line names the open kernel module

  const PciDeviceFact* Pci(const std::string& address) const;
};

// Reads everything above. Never fails as a whole: what cannot be read stays empty, because a
// doctor must report on a host that is half set up.
HostFacts ReadHostFacts(const std::string& sysfs_root, const std::string& proc_root);

// The active MTU the kernel gives a RoCE port on a netdev of `netdev_mtu` bytes: the largest IB
// MTU (256..4096) that fits in the netdev MTU less the RoCE v2 headers (GRH/IP 40, UDP 8, BTH 12,
// XRC 4, AtomicETH 28, ICRC 4 = 96 bytes), as ib_core's iboe_get_mtu does. 0 below 256.
int RoceMtuForNetdev(int netdev_mtu);

// "5.15.0-91-generic" -> {5, 15}; nullopt when it does not start with two numbers.
std::optional<std::pair<int, int>> KernelVersion(const std::string& release);

}  // namespace gdrctl::doctor
