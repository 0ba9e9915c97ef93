#include "tests/client/gdrctl/fake_host.h"

#include <cstdio>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace gdrctl::doctor::testing {
namespace fs = std::filesystem;

namespace {

// 4 KiB of config space: an AER capability at 0x100 chained to ACS at 0x148, whose control
// register (cap + 6) holds `acs_control`.
std::string ConfigWithAcs(int acs_control) {
  std::string c(4096, '\0');
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) c[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put32(0x100, 0x0001u | (1u << 16) | (0x148u << 20));  // AER, version 1, next 0x148
  put32(0x148, 0x000Du | (1u << 16));                   // ACS, version 1, last
  put32(0x14C, 0x005Fu | (static_cast<uint32_t>(acs_control) << 16));
  return c;
}

}  // namespace

std::string MappedGid(const std::string& ipv4) {
  std::vector<std::string> o = absl::StrSplit(ipv4, '.');
  int b[4] = {};
  for (int i = 0; i < 4; ++i) (void)absl::SimpleAtoi(o[i], &b[i]);
  return absl::StrFormat("0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x", b[0], b[1], b[2],
                         b[3]);
}

std::string LinkLocalGid() { return "fe80:0000:0000:0000:0202:c9ff:fe00:0001"; }

FakeHost::FakeHost(std::string root) : root_(std::move(root)), sys_(sys()) {
  fs::create_directories(proc());
}

void FakeHost::Write(const std::string& rel, const std::string& content) const {
  gdr::topo::testing::WriteFile(absl::StrCat(root_, "/", rel), content);
}

std::string FakeHost::PciDevice(const std::vector<std::string>& path, int numa,
                                const std::string& vendor, const std::string& cls) {
  const std::string rel = "sys/" + sys_.PciFunction(path, numa, {vendor, cls, "0x1234"});
  Iommu(path.back(), "identity");
  return rel;
}

void FakeHost::Bridge(const std::vector<std::string>& path, int numa, int acs_control) {
  const std::string rel = PciDevice(path, numa, "0x8086", "0x060400");
  Write(rel + "/config", acs_control < 0 ? std::string(64, '\0') : ConfigWithAcs(acs_control));
}

void FakeHost::Gpu(const std::vector<std::string>& path, int numa, uint64_t bar1) {
  const std::string rel = PciDevice(path, numa, "0x10de", "0x030200");
  const uint64_t base1 = 0x380000000000ull;
  Write(rel + "/resource",
        absl::StrFormat("0x00000000fa000000 0x00000000faffffff 0x0000000000040200\n"
                        "0x%016x 0x%016x 0x000000000014220c\n"
                        "0x0000000000000000 0x0000000000000000 0x0000000000000000\n",
                        base1, base1 + bar1 - 1));
  Write(rel + "/config", std::string(64, '\0'));
}

void FakeHost::Nic(const std::vector<std::string>& path, int numa, const std::string& name,
                   const std::string& physfn) {
  const std::string rel = PciDevice(path, numa, "0x15b3", "0x020000");
  Write(rel + "/config", std::string(64, '\0'));
  const fs::path dev = fs::path(root_) / rel;
  std::error_code ec;
  const fs::path driver = fs::absolute(fs::path(sys()) / "bus/pci/drivers/mlx5_core");
  fs::create_directories(driver);
  fs::create_symlink(driver, dev / "driver", ec);  // the link's target names the driver
  if (!physfn.empty()) {
    std::vector<std::string> pf_path = path;
    pf_path.back() = physfn;
    PciDevice(pf_path, numa, "0x15b3", "0x020000");
    fs::create_symlink(fs::path("..") / physfn, dev / "physfn", ec);
  }
  Write("sys/" + sys_.RdmaDevice(path, name) + "/fw_ver", "28.39.1002\n");
}

void FakeHost::Iommu(const std::string& address, const std::string& type) {
  const fs::path link = fs::path(sys()) / "bus/pci/devices" / address / "iommu_group";
  std::error_code ec;
  fs::remove(link, ec);
  if (type.empty()) return;
  const int group = next_group_++;
  Write(absl::StrCat("sys/kernel/iommu_groups/", group, "/type"), type + "\n");
  // The device directory is deeper than bus/pci/devices: link by absolute path.
  fs::create_symlink(fs::absolute(fs::path(sys()) / "kernel/iommu_groups" / std::to_string(group)),
                     link, ec);
}

void FakeHost::Port(const std::string& device, int port, const std::string& state,
                    const std::string& phys_state, const std::string& link_layer,
                    const std::vector<FakeGid>& gids) {
  const std::string dir = absl::StrCat("sys/class/infiniband/", device, "/ports/", port);
  const int state_num = state == "ACTIVE" ? 4 : state == "DOWN" ? 1 : 2;
  const int phys_num = phys_state == "LinkUp" ? 5 : phys_state == "Disabled" ? 3 : 2;
  Write(dir + "/state", absl::StrCat(state_num, ": ", state, "\n"));
  Write(dir + "/phys_state", absl::StrCat(phys_num, ": ", phys_state, "\n"));
  Write(dir + "/link_layer", link_layer + "\n");
  // Real tables have 255 or more slots, most of them zero.
  for (size_t i = 0; i < gids.size() + 4; ++i) {
    const bool used = i < gids.size();
    Write(absl::StrCat(dir, "/gids/", i),
          (used ? gids[i].gid : "0000:0000:0000:0000:0000:0000:0000:0000") + "\n");
    if (!used) continue;
    Write(absl::StrCat(dir, "/gid_attrs/types/", i), gids[i].type + "\n");
    Write(absl::StrCat(dir, "/gid_attrs/ndevs/", i), gids[i].netdev + "\n");
  }
}

void FakeHost::Netdev(const std::string& name, int mtu) {
  Write(absl::StrCat("sys/class/net/", name, "/mtu"), absl::StrCat(mtu, "\n"));
}

void FakeHost::Arp(const std::string& conf, int arp_ignore, int arp_announce) {
  Write(absl::StrCat("proc/sys/net/ipv4/conf/", conf, "/arp_ignore"),
        absl::StrCat(arp_ignore, "\n"));
  Write(absl::StrCat("proc/sys/net/ipv4/conf/", conf, "/arp_announce"),
        absl::StrCat(arp_announce, "\n"));
}

void FakeHost::Module(const std::string& name) {
  fs::create_directories(fs::path(sys()) / "module" / name);
}

void FakeHost::Kernel(const std::string& release) {
  Write("proc/sys/kernel/osrelease", release + "\n");
}

void FakeHost::NvidiaVersion(const std::string& line) {
  Write("proc/driver/nvidia/version", line + "\n");
}

namespace {

std::vector<FakeGid> RoceGids(const std::string& ip, const std::string& netdev, bool v2) {
  std::vector<FakeGid> g = {{LinkLocalGid(), "IB/RoCE v1", netdev},
                            {MappedGid(ip), "IB/RoCE v1", netdev}};
  if (v2) {
    g.insert(g.begin() + 1, FakeGid{LinkLocalGid(), "RoCE v2", netdev});
    g.push_back(FakeGid{MappedGid(ip), "RoCE v2", netdev});
  }
  return g;
}

}  // namespace

void WriteHealthyHost(const std::string& root) {
  FakeHost h(root);
  for (const auto& [hb, rp, up, dn_nic, dn_gpu, nic, gpu, numa, name] :
       {std::tuple{"pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:02:01.0",
                   "0000:03:00.0", kGpu0, 0, "mlx5_0"},
        std::tuple{"pci0000:80", "0000:80:01.0", "0000:81:00.0", "0000:82:00.0", "0000:82:01.0",
                   "0000:83:00.0", kGpu1, 1, "mlx5_1"}}) {
    h.Bridge({hb, rp}, numa);
    h.Bridge({hb, rp, up}, numa);
    h.Bridge({hb, rp, up, dn_nic}, numa, 0x0011);  // Source Validation + Upstream Forwarding
    h.Bridge({hb, rp, up, dn_gpu}, numa, 0x0011);
    h.Nic({hb, rp, up, dn_nic, nic}, numa, name);
    h.Gpu({hb, rp, up, dn_gpu, gpu}, numa, uint64_t{64} << 30);
  }
  h.Port("mlx5_0", 1, "ACTIVE", "LinkUp", "Ethernet", RoceGids("10.0.0.1", "eth2", true));
  h.Port("mlx5_1", 1, "ACTIVE", "LinkUp", "Ethernet", RoceGids("10.0.1.1", "eth3", true));
  h.Netdev("eth2", 9000);
  h.Netdev("eth3", 9000);
  h.Arp("all", 0, 0);
  h.Arp("eth2", 1, 2);
  h.Arp("eth3", 1, 2);
  h.Module("nvidia");
  h.Module("nvidia_peermem");
  h.Kernel("6.1.0-18-amd64");
  h.NvidiaVersion(
      "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build");
}

void WriteFaultyHost(const std::string& root) {
  FakeHost h(root);
  // Socket 0: mlx5_0 and GPU 0 below one switch whose downstream ports redirect P2P; mlx5_1
  // (a VF) below a second root port.
  h.Bridge({"pci0000:00", "0000:00:01.0"}, 0);
  h.Bridge({"pci0000:00", "0000:00:01.0", "0000:01:00.0"}, 0);
  h.Bridge({"pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0"}, 0, 0x001D);
  h.Bridge({"pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0"}, 0, 0x001D);
  h.Nic({"pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0"}, 0,
        "mlx5_0");
  h.Gpu({"pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0", kGpu0}, 0,
        uint64_t{256} << 20);
  h.Bridge({"pci0000:00", "0000:00:02.0"}, 0);
  h.Nic({"pci0000:00", "0000:00:02.0", "0000:05:00.2"}, 0, "mlx5_1", "0000:05:00.0");
  // Socket 1: GPU 1 with no NIC.
  h.Bridge({"pci0000:80", "0000:80:01.0"}, 1);
  h.Gpu({"pci0000:80", "0000:80:01.0", kGpu1}, 1, uint64_t{256} << 20);
  for (const char* a : {"0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:02:01.0",
                        "0000:03:00.0", kGpu0, "0000:00:02.0", "0000:05:00.2", "0000:80:01.0",
                        kGpu1}) {
    h.Iommu(a, "DMA-FQ");
  }
  h.Port("mlx5_0", 1, "ACTIVE", "LinkUp", "Ethernet", RoceGids("10.0.0.1", "eth2", false));
  h.Port("mlx5_1", 1, "DOWN", "Disabled", "Ethernet", RoceGids("10.0.1.1", "eth3", true));
  h.Netdev("eth2", 1500);
  h.Netdev("eth3", 1500);
  h.Arp("all", 0, 0);
  h.Arp("eth2", 0, 0);
  h.Arp("eth3", 0, 0);
  h.Module("nvidia");
  h.Kernel("5.4.0-150-generic");
  h.NvidiaVersion("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Release Build");
}

}  // namespace gdrctl::doctor::testing
