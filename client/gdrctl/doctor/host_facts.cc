#include "client/gdrctl/doctor/host_facts.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/verbs/gid_table.h"

namespace gdrctl::doctor {
namespace fs = std::filesystem;

namespace {

std::string FirstLine(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

int IntFile(const fs::path& p, int fallback) {
  int v = 0;
  return absl::SimpleAtoi(FirstLine(p), &v) ? v : fallback;
}

// sysfs writes port states as "4: ACTIVE" and "5: LinkUp": the words are what people know.
std::string AfterColon(const std::string& s) {
  const size_t colon = s.find(':');
  if (colon == std::string::npos) return s;
  return std::string(absl::StripAsciiWhitespace(s.substr(colon + 1)));
}

std::string LinkTarget(const fs::path& link) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(link, ec);
  return ec ? "" : target.filename().string();
}

std::vector<std::string> DirNames(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

PortFact ReadPort(const std::string& sysfs_root, const fs::path& dev_dir, const std::string& dev,
                  int port) {
  const fs::path dir = dev_dir / "ports" / std::to_string(port);
  PortFact p;
  p.port = port;
  p.state = AfterColon(FirstLine(dir / "state"));
  p.phys_state = AfterColon(FirstLine(dir / "phys_state"));
  p.link_layer = FirstLine(dir / "link_layer");
  const int table_len = static_cast<int>(DirNames(dir / "gids").size());
  absl::StatusOr<std::vector<gdr::verbs::GidEntry>> table =
      gdr::verbs::ReadGidTable(sysfs_root, dev, port, table_len);
  if (table.ok()) {
    for (const gdr::verbs::GidEntry& e : *table) {
      GidFact g;
      g.index = e.index;
      g.gid = gdr::verbs::FormatGid(e.gid);
      g.type = e.type;
      g.netdev = e.netdev;
      g.ipv4 = gdr::verbs::GidIpv4(e.gid).value_or("");
      if (p.netdev.empty()) p.netdev = e.netdev;
      p.gids.push_back(std::move(g));
    }
  }
  if (p.netdev.empty() && p.link_layer == "Ethernet") {
    // No GID carries the interface (no IP address yet): the PCI function's own netdev.
    std::vector<std::string> nets = DirNames(dev_dir / "device" / "net");
    if (!nets.empty()) p.netdev = nets.front();
  }
  if (!p.netdev.empty()) {
    p.netdev_mtu = IntFile(fs::path(sysfs_root) / "class" / "net" / p.netdev / "mtu", 0);
  }
  return p;
}

PciDeviceFact ReadPciDevice(const fs::path& pci_dir, const std::string& address) {
  const fs::path dir = pci_dir / address;
  PciDeviceFact f;
  f.address = address;
  std::error_code ec;
  f.has_iommu_group = fs::exists(dir / "iommu_group", ec);
  if (f.has_iommu_group) f.iommu_type = FirstLine(dir / "iommu_group" / "type");
  {
    std::ifstream in(dir / "resource");
    std::string line;
    for (int i = 0; std::getline(in, line); ++i) {
      if (i != 1) continue;
      std::vector<std::string> cols = absl::StrSplit(line, ' ', absl::SkipEmpty());
      uint64_t start = 0, end = 0;
      if (cols.size() >= 2 && absl::SimpleHexAtoi(cols[0], &start) &&
          absl::SimpleHexAtoi(cols[1], &end) && end > start) {
        f.bar1_bytes = end - start + 1;
      }
      break;
    }
  }
  std::ifstream cfg(dir / "config", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(cfg)), std::istreambuf_iterator<char>());
  f.config_bytes = bytes.size();
  f.acs = ParseAcs(bytes);
  return f;
}

}  // namespace

const PciDeviceFact* HostFacts::Pci(const std::string& address) const {
  for (const PciDeviceFact& f : pci)
    if (f.address == address) return &f;
  return nullptr;
}

int RoceMtuForNetdev(int netdev_mtu) {
  const int payload = netdev_mtu - (40 + 8 + 12 + 4 + 28 + 4);
  for (int mtu : {4096, 2048, 1024, 512, 256}) {
    if (payload >= mtu) return mtu;
  }
  return 0;
}

std::optional<std::pair<int, int>> KernelVersion(const std::string& release) {
  std::vector<std::string> parts = absl::StrSplit(release, absl::MaxSplits('.', 2));
  int major = 0, minor = 0;
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &major)) return std::nullopt;
  std::string m = parts[1];
  m.erase(std::find_if(m.begin(), m.end(), [](char c) { return !absl::ascii_isdigit(c); }),
          m.end());
  if (!absl::SimpleAtoi(m, &minor)) return std::nullopt;
  return std::make_pair(major, minor);
}

HostFacts ReadHostFacts(const std::string& sysfs_root, const std::string& proc_root) {
  HostFacts h;
  h.sysfs_root = sysfs_root;
  h.proc_root = proc_root;
  const fs::path sys(sysfs_root);
  const fs::path proc(proc_root);
  const fs::path pci_dir = sys / "bus" / "pci" / "devices";

  for (const std::string& name : DirNames(sys / "class" / "infiniband")) {
    const fs::path dir = sys / "class" / "infiniband" / name;
    RdmaDeviceFact d;
    d.name = name;
    d.fw_ver = FirstLine(dir / "fw_ver");
    std::error_code ec;
    const fs::path parent = fs::canonical(dir / "device", ec);
    if (!ec && fs::exists(parent / "vendor", ec)) {
      d.pci = parent.filename().string();
      d.driver = LinkTarget(parent / "driver");
      if (fs::exists(parent / "physfn", ec)) d.physfn = LinkTarget(parent / "physfn");
    }
    for (const std::string& port : DirNames(dir / "ports")) {
      int n = 0;
      if (absl::SimpleAtoi(port, &n)) d.ports.push_back(ReadPort(sysfs_root, dir, name, n));
    }
    std::sort(d.ports.begin(), d.ports.end(),
              [](const PortFact& a, const PortFact& b) { return a.port < b.port; });
    h.rdma.push_back(std::move(d));
  }

  absl::StatusOr<gdr::topo::Topology> topo = gdr::topo::ReadTopology(sysfs_root);
  if (topo.ok()) {
    h.topo = *std::move(topo);
  } else {
    h.topo_error = std::string(topo.status().message());
  }
  std::set<std::string> addresses;
  auto add_node = [&](const gdr::topo::PciNode& n) {
    addresses.insert(n.address);
    addresses.insert(n.bridges.begin(), n.bridges.end());
  };
  for (const gdr::topo::Nic& n : h.topo.nics) add_node(n.pci);
  for (const gdr::topo::Gpu& g : h.topo.gpus) add_node(g.pci);
  for (const std::string& a : addresses) h.pci.push_back(ReadPciDevice(pci_dir, a));

  std::map<std::string, std::set<std::string>> netdevs;  // name -> IPv4 addresses
  for (const RdmaDeviceFact& d : h.rdma) {
    for (const PortFact& p : d.ports) {
      if (!p.netdev.empty()) netdevs[p.netdev];
      for (const GidFact& g : p.gids) {
        if (!g.netdev.empty() && !g.ipv4.empty()) netdevs[g.netdev].insert(g.ipv4);
      }
    }
  }
  const fs::path conf = proc / "sys" / "net" / "ipv4" / "conf";
  const int all_ignore = IntFile(conf / "all" / "arp_ignore", -1);
  const int all_announce = IntFile(conf / "all" / "arp_announce", -1);
  for (const auto& [name, ips] : netdevs) {
    NetdevFact n;
    n.name = name;
    n.ipv4.assign(ips.begin(), ips.end());
    const int ignore = IntFile(conf / name / "arp_ignore", -1);
    const int announce = IntFile(conf / name / "arp_announce", -1);
    // The kernel applies the larger of conf/all and conf/<if> for both settings.
    if (ignore >= 0 || all_ignore >= 0) n.arp.arp_ignore = std::max(ignore, all_ignore);
    if (announce >= 0 || all_announce >= 0) n.arp.arp_announce = std::max(announce, all_announce);
    h.rdma_netdevs.push_back(std::move(n));
  }

  std::error_code ec;
  h.module_nvidia = fs::exists(sys / "module" / "nvidia", ec);
  h.module_nvidia_peermem = fs::exists(sys / "module" / "nvidia_peermem", ec);
  {
    // MOFED's ib_core exports the peer-memory client API nvidia-peermem registers with; stock
    // kernels do not. kallsyms lists symbol names to everyone (addresses only to root).
    std::ifstream in(proc / "kallsyms");
    std::string line;
    while (!h.peer_memory_api && std::getline(in, line)) {
      h.peer_memory_api = absl::EndsWith(line, " ib_register_peer_memory_client") ||
                          absl::StrContains(line, " ib_register_peer_memory_client\t");
    }
  }
  h.kernel_release = FirstLine(proc / "sys" / "kernel" / "osrelease");
  h.nvidia_driver = FirstLine(proc / "driver" / "nvidia" / "version");
  h.nvidia_open_module = absl::StrContains(h.nvidia_driver, "Open Kernel Module");
  return h;
}

}  // namespace gdrctl::doctor
