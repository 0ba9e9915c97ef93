// Fake sysfs trees for tests of the PCIe topology: PCI functions under devices/pciDDDD:BB/...
// with their bus/pci/devices links, and RDMA devices under their NIC with class/infiniband
// links, laid out as the kernel does. Also one whole node shaped like a DGX H100 (8 GPUs and 8
// ConnectX NICs, a GPU and a NIC below each of eight PCIe switches, four per socket).
#pragma once

#include <array>
#include <string>
#include <vector>

namespace gdr::topo::testing {

// Writes `content` to `path`, creating the directories above it.
void WriteFile(const std::string& path, const std::string& content);

// What a PCI function's identity files say.
struct PciIds {
  std::string vendor;  // "0x10de"
  std::string cls;     // "0x030200"
  std::string device;  // "0x2330"
};
inline const PciIds kRootPortIds{"0x8086", "0x060400", "0x352a"};
inline const PciIds kSwitchPortIds{"0x1000", "0x060400", "0xc030"};  // a Broadcom PEX switch
inline const PciIds kH100Ids{"0x10de", "0x030200", "0x2330"};
inline const PciIds kConnectX7Ids{"0x15b3", "0x020700", "0x1021"};

// One sysfs tree rooted at `root` (what ReadTopology takes). Not thread-safe; a failed write
// shows as a missing file, which the tests reading the tree then name.
class FakeSysfs {
 public:
  explicit FakeSysfs(std::string root);  // creates root
  const std::string& root() const { return root_; }

  // A PCI function at `path` (host bridge first, e.g. {"pci0000:00", "0000:00:01.0",
  // "0000:01:00.0"}; the last element is its address) with vendor, class, device and numa_node
  // files and its bus/pci/devices link. Returns its directory relative to root
  // ("devices/pci0000:00/0000:00:01.0/0000:01:00.0").
  std::string PciFunction(const std::vector<std::string>& path, int numa, const PciIds& ids);
  // RDMA device `name` on the PCI function at `path` (already made): its directory below the
  // function, the device link back to it and the class/infiniband link. Returns the device's
  // directory relative to root.
  std::string RdmaDevice(const std::vector<std::string>& path, const std::string& name);
  // An RDMA device with no PCI parent (rxe, siw): devices/virtual/infiniband/<name>.
  void SoftRdmaDevice(const std::string& name);

 private:
  std::string root_;
};

// The DGX H100-like node: two sockets (NUMA nodes 0 and 1); each PCIe switch hangs off a root
// port of its own host bridge (one root complex per switch, as on Sapphire Rapids) and carries
// GPU i and mlx5_i on two downstream ports. Switches 0-3 are on socket 0, 4-7 on socket 1.
inline constexpr int kDgxSwitches = 8;
inline constexpr std::array<const char*, kDgxSwitches> kDgxGpus = {
    "0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
    "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"};
inline constexpr std::array<const char*, kDgxSwitches> kDgxNics = {
    "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"};
inline constexpr std::array<const char*, kDgxSwitches> kDgxNicAddresses = {
    "0000:19:00.0", "0000:2b:00.0", "0000:3b:00.0", "0000:5e:00.0",
    "0000:9b:00.0", "0000:ac:00.0", "0000:bb:00.0", "0000:dc:00.0"};
inline int DgxSocketOf(int sw) { return sw < kDgxSwitches / 2 ? 0 : 1; }

// Writes that node under `root`.
void WriteDgxH100Node(const std::string& root);

}  // namespace gdr::topo::testing
