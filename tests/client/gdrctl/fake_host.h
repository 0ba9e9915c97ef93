// Fake sysfs and procfs trees for `gdrctl doctor` tests, laid out as the kernel does: PCI
// devices under devices/pciDDDD:BB/... with bus/pci/devices links, RDMA devices under the NIC with
// class/infiniband links, ports with GID tables, netdev MTUs, IOMMU groups, 4 KiB config spaces
// with an ACS capability, BARs, modules, the kernel release and ARP sysctls. Two whole hosts
// (healthy, and one with every fault) are what the unit test and the CLI test share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/common/fake_sysfs.h"

namespace gdrctl::doctor::testing {

struct FakeGid {
  std::string gid;  // sysfs text, e.g. "0000:0000:0000:0000:0000:ffff:0a00:0001"
  std::string type; // "RoCE v2"
  std::string netdev;
};

// "10.0.0.1" -> the IPv4-mapped GID text.
std::string MappedGid(const std::string& ipv4);
// The link-local GID of an interface (what a port shows before it has an address).
std::string LinkLocalGid();

class FakeHost {
 public:
  // Creates <root>/sys and <root>/proc.
  explicit FakeHost(std::string root);
  std::string sys() const { return root_ + "/sys"; }
  std::string proc() const { return root_ + "/proc"; }

  // A PCIe bridge (root port or switch port) at `path` (host bridge first, e.g.
  // {"pci0000:00", "0000:00:01.0"}) with an ACS capability whose control register is
  // `acs_control` (-1: no 4 KiB config, as a non-root reader sees it).
  void Bridge(const std::vector<std::string>& path, int numa, int acs_control = 0);
  // An NVIDIA 3D controller at `path` with a BAR1 of `bar1` bytes.
  void Gpu(const std::vector<std::string>& path, int numa, uint64_t bar1);
  // A Mellanox NIC function at `path` with RDMA device `name`; `physfn`: the PF's address for a
  // VF (a sibling PCI function that is created too), else empty.
  void Nic(const std::vector<std::string>& path, int numa, const std::string& name,
           const std::string& physfn = "");
  // The IOMMU group type of the device at `address` ("" removes the group: IOMMU off).
  void Iommu(const std::string& address, const std::string& type);
  void Port(const std::string& device, int port, const std::string& state,
            const std::string& phys_state, const std::string& link_layer,
            const std::vector<FakeGid>& gids);
  void Netdev(const std::string& name, int mtu);
  void Arp(const std::string& conf, int arp_ignore, int arp_announce);  // conf: "all" or an if
  void Module(const std::string& name);
  void Kernel(const std::string& release);
  void NvidiaVersion(const std::string& line);

  void Write(const std::string& rel, const std::string& content) const;

 private:
  // Creates the device directory, its bus/pci/devices link and an identity IOMMU group.
  std::string PciDevice(const std::vector<std::string>& path, int numa, const std::string& vendor,
                        const std::string& cls);
  std::string root_;
  gdr::topo::testing::FakeSysfs sys_;  // the PCI and RDMA devices under sys()
  int next_group_ = 1;
};

// 2 GPUs, 2 mlx5 NICs (each GPU on a switch with its NIC), RoCE v2 GIDs with IPv4 on two
// interfaces at MTU 9000 with the right ARP settings, identity IOMMU, no ACS redirect, 64 GiB
// BAR1s, nvidia-peermem loaded, open NVIDIA module on 6.1.
void WriteHealthyHost(const std::string& root);

// Every fault: mlx5_1 (an SR-IOV VF) port DOWN/Disabled, mlx5_0 with RoCE v1 GIDs only, netdev
// MTU 1500, DMA-FQ IOMMU, ACS redirect on the switch GPU 0 shares with mlx5_0, GPU 1 on the
// other socket from both NICs, 256 MiB BAR1s, default ARP settings, no nvidia-peermem,
// proprietary NVIDIA module on 5.4.
void WriteFaultyHost(const std::string& root);

// The PCI addresses those hosts use.
inline constexpr char kGpu0[] = "0000:04:00.0";
inline constexpr char kGpu1[] = "0000:84:00.0";

}  // namespace gdrctl::doctor::testing
