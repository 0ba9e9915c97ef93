#include "common/topo/pci_topology.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/base/json.h"
#include "common/base/status_macros.h"

namespace gdr::topo {
namespace fs = std::filesystem;

namespace {

std::string ReadFirstLine(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

bool IsPciAddress(const std::string& s) {
  static const std::regex re("^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]$");
  return std::regex_match(s, re);
}

// Resolves `link` (a sysfs device link) to its place under <root>/devices and splits the path
// into host bridge, bridges and the device itself.
absl::StatusOr<PciNode> NodeFromLink(const fs::path& root, const fs::path& link) {
  std::error_code ec;
  const fs::path real = fs::canonical(link, ec);
  if (ec) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", link.string(), ": ", ec.message()));
  }
  const fs::path devices = fs::canonical(root / "devices", ec);
  if (ec) {
    return absl::NotFoundError(absl::StrCat("no ", (root / "devices").string(), ": ",
                                            ec.message()));
  }
  const fs::path rel = real.lexically_relative(devices);
  std::vector<std::string> parts;
  for (const fs::path& part : rel) parts.push_back(part.string());
  if (parts.size() < 2 || parts.front().rfind("pci", 0) != 0 || parts.front() == ".." ||
      !IsPciAddress(parts.back())) {
    return absl::NotFoundError(
        absl::StrCat(link.string(), " -> ", real.string(), " is not a PCI device under ",
                     devices.string()));
  }
  PciNode n;
  n.host_bridge = parts.front();
  n.address = parts.back();
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    if (IsPciAddress(parts[i])) n.bridges.push_back(parts[i]);
  }
  int numa = -1;
  if (absl::SimpleAtoi(ReadFirstLine(real / "numa_node"), &numa)) n.numa_node = numa;
  return n;
}

const Gpu* FindGpu(const Topology& topo, absl::string_view pci) {
  for (const Gpu& g : topo.gpus)
    if (g.pci.address == pci) return &g;
  return nullptr;
}

const Nic* FindNic(const Topology& topo, absl::string_view name) {
  for (const Nic& n : topo.nics)
    if (n.name == name) return &n;
  return nullptr;
}

size_t SharedBridges(const PciNode& a, const PciNode& b) {
  if (a.host_bridge != b.host_bridge) return 0;
  size_t i = 0;
  while (i < a.bridges.size() && i < b.bridges.size() && a.bridges[i] == b.bridges[i]) ++i;
  return i;
}

}  // namespace

std::string PciNode::path() const {
  std::vector<std::string> parts = {host_bridge};
  parts.insert(parts.end(), bridges.begin(), bridges.end());
  parts.push_back(address);
  return absl::StrJoin(parts, "/");
}

const char* RelationName(Relation r) {
  switch (r) {
    case Relation::kSameSwitch: return "same switch";
    case Relation::kSameRootPort: return "same root port";
    case Relation::kSameHostBridge: return "same host bridge";
    case Relation::kSameNumaNode: return "same NUMA node";
    case Relation::kAcrossSockets: return "across sockets";
  }
  return "?";
}

const char* RelationShort(Relation r) {
  switch (r) {
    case Relation::kSameSwitch: return "SW";
    case Relation::kSameRootPort: return "RP";
    case Relation::kSameHostBridge: return "HB";
    case Relation::kSameNumaNode: return "NODE";
    case Relation::kAcrossSockets: return "SYS";
  }
  return "?";
}

Relation Relate(const PciNode& a, const PciNode& b) {
  if (a.host_bridge == b.host_bridge) {
    const size_t shared = SharedBridges(a, b);
    if (shared >= 2) return Relation::kSameSwitch;
    if (shared == 1) return Relation::kSameRootPort;
    return Relation::kSameHostBridge;
  }
  if (a.numa_node >= 0 && a.numa_node == b.numa_node) return Relation::kSameNumaNode;
  return Relation::kAcrossSockets;
}

int Hops(const PciNode& a, const PciNode& b) {
  const size_t shared = SharedBridges(a, b);
  return static_cast<int>(a.bridges.size() - shared + b.bridges.size() - shared) + 2;
}

absl::StatusOr<Topology> ReadTopology(const std::string& sysfs_root) {
  const fs::path root(sysfs_root);
  const fs::path ib = root / "class" / "infiniband";
  const fs::path pci = root / "bus" / "pci" / "devices";
  std::error_code ec;
  const bool have_ib = fs::is_directory(ib, ec);
  const bool have_pci = fs::is_directory(pci, ec);
  if (!have_ib && !have_pci) {
    return absl::NotFoundError(absl::StrCat("no ", ib.string(), " and no ", pci.string(),
                                            ": is ", sysfs_root, " a sysfs tree?"));
  }
  Topology t;
  if (have_ib) {
    for (const fs::directory_entry& e : fs::directory_iterator(ib, ec)) {
      absl::StatusOr<PciNode> n = NodeFromLink(root, e.path() / "device");
      if (!n.ok()) {  // a software device (rxe, siw) has no PCI parent
        t.off_tree_nics.push_back(e.path().filename().string());
        continue;
      }
      t.nics.push_back(Nic{e.path().filename().string(), std::move(*n)});
    }
  }
  if (have_pci) {
    for (const fs::directory_entry& e : fs::directory_iterator(pci, ec)) {
      if (ReadFirstLine(e.path() / "vendor") != "0x10de") continue;
      const std::string cls = ReadFirstLine(e.path() / "class");
      // 0x0300xx VGA, 0x0302xx 3D controller; NVSwitches and bridges are other classes.
      if (cls.rfind("0x0300", 0) != 0 && cls.rfind("0x0302", 0) != 0) continue;
      absl::StatusOr<PciNode> n = NodeFromLink(root, e.path());
      if (!n.ok()) continue;
      t.gpus.push_back(Gpu{std::move(*n), ReadFirstLine(e.path() / "device")});
    }
  }
  std::sort(t.nics.begin(), t.nics.end(),
            [](const Nic& a, const Nic& b) { return a.name < b.name; });
  std::sort(t.off_tree_nics.begin(), t.off_tree_nics.end());
  std::sort(t.gpus.begin(), t.gpus.end(),
            [](const Gpu& a, const Gpu& b) { return a.pci.address < b.pci.address; });
  return t;
}

std::vector<NicRank> RankNics(const Topology& topo, absl::string_view gpu_pci,
                              const std::vector<std::string>& nic_names) {
  const Gpu* gpu = FindGpu(topo, gpu_pci);
  std::vector<NicRank> ranks;
  ranks.reserve(nic_names.size());
  for (const std::string& name : nic_names) {
    NicRank r;
    r.name = name;
    if (gpu != nullptr) r.nic = FindNic(topo, name);
    if (r.known()) {
      r.relation = Relate(gpu->pci, r.nic->pci);
      r.hops = Hops(gpu->pci, r.nic->pci);
    }
    ranks.push_back(std::move(r));
  }
  // Stable: equals keep the order given, which is the caller's preference among them.
  std::stable_sort(ranks.begin(), ranks.end(), [](const NicRank& a, const NicRank& b) {
    return std::make_tuple(!a.known(), static_cast<int>(a.relation), a.hops) <
           std::make_tuple(!b.known(), static_cast<int>(b.relation), b.hops);
  });
  return ranks;
}

absl::StatusOr<NicChoice> ChooseNic(const Topology& topo, absl::string_view gpu_pci,
                                    const std::vector<std::string>& nic_names) {
  const Gpu* gpu = FindGpu(topo, gpu_pci);
  if (gpu == nullptr) {
    return absl::NotFoundError(absl::StrCat("no GPU at ", gpu_pci, " in the PCI tree"));
  }
  if (nic_names.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("no NIC to choose from for GPU ", gpu_pci));
  }
  NicChoice c{RankNics(topo, gpu_pci, nic_names).front(), ""};
  if (!c.rank.known() || c.rank.relation != Relation::kAcrossSockets) return c;
  const int numa = gpu->pci.numa_node;
  c.warning = numa >= 0 ? absl::StrFormat("GPU %s has no NIC on its NUMA node (%d)", gpu_pci, numa)
                        : absl::StrFormat("GPU %s has no NIC on its root complex and sysfs gives "
                                          "it no NUMA node",
                                          gpu_pci);
  const std::vector<std::string> all = AllNicNames(topo);
  const bool every_nic = std::all_of(topo.nics.begin(), topo.nics.end(), [&](const Nic& n) {
    return std::find(nic_names.begin(), nic_names.end(), n.name) != nic_names.end();
  });
  if (!every_nic) absl::StrAppend(&c.warning, " among ", absl::StrJoin(nic_names, ","));
  absl::StrAppendFormat(&c.warning, "; using %s %sacross sockets (SYS)", c.rank.name,
                        numa >= 0 ? "" : "possibly ");
  // A nearer NIC the caller left out is the fix to name.
  const NicRank nearest = RankNics(topo, gpu_pci, all).front();
  if (nearest.known() && nearest.relation != Relation::kAcrossSockets) {
    absl::StrAppendFormat(&c.warning, "; %s (%s) is nearer but not among them", nearest.name,
                          RelationName(nearest.relation));
  }
  return c;
}

absl::StatusOr<const Nic*> NearestNic(const Topology& topo, absl::string_view gpu_pci) {
  if (FindGpu(topo, gpu_pci) == nullptr) {
    return absl::NotFoundError(absl::StrCat("no GPU at ", gpu_pci, " in the PCI tree"));
  }
  if (topo.nics.empty()) return absl::NotFoundError("no RDMA device with a PCI parent");
  std::vector<std::string> names;
  for (const Nic& n : topo.nics) names.push_back(n.name);
  GDR_ASSIGN_OR_RETURN(NicChoice c, ChooseNic(topo, gpu_pci, names));
  return c.rank.nic;
}

std::vector<std::string> AllNicNames(const Topology& topo) {
  std::vector<std::string> names;
  for (const Nic& n : topo.nics) names.push_back(n.name);
  names.insert(names.end(), topo.off_tree_nics.begin(), topo.off_tree_nics.end());
  return names;
}

std::string FormatTopology(const Topology& topo, const std::vector<std::string>& rails) {
  std::string out = "RDMA devices:\n";
  if (topo.nics.empty() && topo.off_tree_nics.empty()) out += "  (none)\n";
  for (const Nic& n : topo.nics) {
    absl::StrAppendFormat(&out, "  %-10s %s  numa %-2d %s\n", n.name, n.pci.address,
                          n.pci.numa_node, n.pci.path());
  }
  for (const std::string& name : topo.off_tree_nics) {
    absl::StrAppendFormat(&out, "  %-10s not on the PCI tree (a software device)\n", name);
  }
  out += "GPUs:\n";
  if (topo.gpus.empty()) out += "  (none)\n";
  for (const Gpu& g : topo.gpus) {
    absl::StrAppendFormat(&out, "  %-10s %s  numa %-2d %s\n", g.device_id, g.pci.address,
                          g.pci.numa_node, g.pci.path());
  }
  if (topo.gpus.empty() || rails.empty()) return out;
  absl::StrAppend(&out, "Rails: ", absl::StrJoin(rails, ", "), "\n");
  out += "GPU to NIC (SW same switch, RP same root port, HB same host bridge, NODE same NUMA "
         "node, SYS across sockets), and the rail a client uses for the GPU:\n";
  absl::StrAppendFormat(&out, "  %-14s", "");
  for (const Nic& n : topo.nics) absl::StrAppendFormat(&out, " %-10s", n.name);
  out += " rail\n";
  std::vector<std::string> warnings;
  for (const Gpu& g : topo.gpus) {
    absl::StrAppendFormat(&out, "  %-14s", g.pci.address);
    for (const Nic& n : topo.nics) {
      absl::StrAppendFormat(&out, " %-10s", RelationShort(Relate(g.pci, n.pci)));
    }
    absl::StatusOr<NicChoice> c = ChooseNic(topo, g.pci.address, rails);
    if (!c.ok()) {
      absl::StrAppend(&out, " ", c.status().message(), "\n");
      continue;
    }
    absl::StrAppendFormat(&out, " %s (%s)\n", c->rank.name,
                          c->rank.known() ? RelationName(c->rank.relation)
                                          : "not on the PCI tree");
    if (!c->warning.empty()) warnings.push_back(c->warning);
  }
  for (const std::string& w : warnings) absl::StrAppend(&out, "warning: ", w, "\n");
  return out;
}

std::string TopologyJson(const Topology& topo, const std::vector<std::string>& rails) {
  using gdr::json::Json;
  // A node's place: its keys come first in the object of a NIC or a GPU.
  auto node = [](Json& j, const PciNode& n) {
    j["pci"] = n.address;
    j["numa_node"] = n.numa_node;
    j["path"] = n.path();
  };
  Json nics = Json::array(), gpus = Json::array();
  for (const Nic& nic : topo.nics) {
    Json j = {{"name", nic.name}};
    node(j, nic.pci);
    nics.push_back(std::move(j));
  }
  for (const Gpu& g : topo.gpus) {
    Json j = Json::object();
    node(j, g.pci);
    j["device_id"] = g.device_id;
    Json relations = Json::object();
    for (const Nic& nic : topo.nics) relations[nic.name] = RelationName(Relate(g.pci, nic.pci));
    j["nics"] = std::move(relations);
    absl::StatusOr<const Nic*> best = NearestNic(topo, g.pci.address);
    if (best.ok()) j["nearest_nic"] = (*best)->name;
    absl::StatusOr<NicChoice> c = ChooseNic(topo, g.pci.address, rails);
    if (c.ok() && c->rank.known()) {
      j["rail"] = {{"name", c->rank.name},
                   {"relation", RelationName(c->rank.relation)},
                   {"hops", c->rank.hops}};
    } else if (c.ok()) {
      j["rail"] = {{"name", c->rank.name}, {"relation", "unknown"}};
    }
    if (c.ok() && !c->warning.empty()) j["rail_warning"] = c->warning;
    gpus.push_back(std::move(j));
  }
  const Json doc = {{"nics", std::move(nics)},
                    {"off_tree_nics", topo.off_tree_nics},
                    {"rails", rails},
                    {"gpus", std::move(gpus)}};
  return gdr::json::Dump(doc);
}

}  // namespace gdr::topo
