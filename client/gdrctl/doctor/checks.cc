#include "client/gdrctl/doctor/checks.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/base/units.h"

namespace gdrctl::doctor {
namespace {

using gdr::topo::Relation;

// Below this a GPU's BAR1 is the legacy 256 MiB window of a card without Resizable BAR. GPU
// memory registered for RDMA (dma-buf or nvidia-peermem) is mapped through BAR1 while the
// registration lives, the driver keeps part of the window for itself, and a client registers a
// buffer per op in flight (`gdrctl bench --qd 2 -s 256MiB` holds 512 MiB): under 1 GiB such
// registrations fail. Data-center GPUs have 16 GiB and more.
constexpr uint64_t kSmallBar1 = uint64_t{1} << 30;

class Results {
 public:
  void Add(std::string check, std::string subject, Verdict v, std::string found,
           std::string advice = "") {
    if (v == Verdict::kPass) advice.clear();
    out_.push_back(CheckResult{std::move(check), std::move(subject), v, std::move(found),
                               std::move(advice)});
  }
  std::vector<CheckResult> Take() { return std::move(out_); }

 private:
  std::vector<CheckResult> out_;
};

std::string Size(uint64_t bytes) { return gdr::FormatSize(bytes); }

bool IsRoceV2(const GidFact& g) { return absl::EqualsIgnoreCase(g.type, "RoCE v2"); }

std::string PortSubject(const RdmaDeviceFact& d, const PortFact& p) {
  return absl::StrCat(d.name, " port ", p.port);
}

// The kernel writes dotted interface names (VLANs: eth0.100) with '/' in sysctl keys.
std::string SysctlName(const std::string& netdev) {
  return absl::StrReplaceAll(netdev, {{".", "/"}});
}

void CheckRdma(const HostFacts& h, Probes& probes, Results& r) {
  if (h.rdma.empty()) {
    r.Add("rdma.devices", "", Verdict::kFail,
          absl::StrCat("no RDMA device in ", h.sysfs_root, "/class/infiniband"),
          "load the NIC's RDMA driver (ConnectX: mlx5_ib); without one only --transport tcp "
          "works");
    return;
  }
  std::vector<std::string> names;
  bool any_active = false;
  for (const RdmaDeviceFact& d : h.rdma) {
    std::string what = d.pci.empty() ? "software device" : d.pci;
    if (!d.driver.empty()) absl::StrAppend(&what, ", ", d.driver);
    if (!d.fw_ver.empty()) absl::StrAppend(&what, ", fw ", d.fw_ver);
    names.push_back(absl::StrCat(d.name, " (", what, ")"));
    for (const PortFact& p : d.ports) any_active |= p.state == "ACTIVE";
  }
  r.Add("rdma.devices", "", Verdict::kPass,
        absl::StrCat(h.rdma.size(), " RDMA device", h.rdma.size() == 1 ? "" : "s", ": ",
                     absl::StrJoin(names, ", ")));

  for (const RdmaDeviceFact& d : h.rdma) {
    for (const PortFact& p : d.ports) {
      const std::string subject = PortSubject(d, p);
      const bool ethernet = p.link_layer == "Ethernet";
      const std::string netdev = p.netdev.empty() ? "its interface" : p.netdev;
      // State.
      std::string found = absl::StrCat(p.state.empty() ? "state unknown" : p.state, ", ",
                                       p.phys_state.empty() ? "?" : p.phys_state, ", ",
                                       p.link_layer.empty() ? "link layer unknown" : p.link_layer);
      if (!p.netdev.empty()) absl::StrAppend(&found, " on ", p.netdev);
      if (p.state == "ACTIVE") {
        r.Add("rdma.port", subject, Verdict::kPass, found);
      } else {
        std::string advice;
        if (p.phys_state == "Disabled") {
          advice = absl::StrCat("the port is administratively down: ip link set ", netdev, " up");
        } else if (p.phys_state == "Polling") {
          advice = "no link partner: check the cable and the switch port";
        } else {
          advice = absl::StrCat("bring the link up (cable, switch port, `ip link show ", netdev,
                                "`)");
        }
        if (any_active) absl::StrAppend(&advice, ", or ignore it if this port is unused");
        // A second, unused port being down is normal; no usable port at all is not.
        r.Add("rdma.port", subject, any_active ? Verdict::kWarn : Verdict::kFail, found, advice);
      }
      // RoCE v2 GID.
      if (ethernet) {
        std::vector<std::string> v2, other_types;
        bool v2_routable = false;
        for (const GidFact& g : p.gids) {
          if (!IsRoceV2(g)) {
            other_types.push_back(g.type.empty() ? "untyped" : g.type);
            continue;
          }
          v2.push_back(absl::StrCat("GID[", g.index, "] ", g.ipv4.empty() ? g.gid : g.ipv4));
          v2_routable |= !g.ipv4.empty() || !absl::StartsWith(g.gid, "fe80:");
        }
        if (v2.empty()) {
          std::sort(other_types.begin(), other_types.end());
          other_types.erase(std::unique(other_types.begin(), other_types.end()),
                            other_types.end());
          r.Add("rdma.gid", subject, Verdict::kFail,
                absl::StrCat("no RoCE v2 GID", other_types.empty() ? "" : " (only ",
                             absl::StrJoin(other_types, ", "), other_types.empty() ? "" : ")"),
                absl::StrCat("give ", netdev,
                             " an IP address (RoCE v2 GIDs follow its addresses); only RoCE v1 "
                             "entries means a kernel or driver without RoCE v2"));
        } else if (!v2_routable) {
          r.Add("rdma.gid", subject, Verdict::kWarn,
                absl::StrCat("only link-local RoCE v2 GIDs: ", absl::StrJoin(v2, ", ")),
                absl::StrCat("give ", netdev, " an IPv4 address: rc picks the IPv4-mapped entry"));
        } else {
          r.Add("rdma.gid", subject, Verdict::kPass,
                absl::StrCat("RoCE v2: ", absl::StrJoin(v2, ", ")));
        }
      }
      // Active MTU: the verbs answer, else what the kernel derives from the netdev MTU.
      absl::StatusOr<PortQuery> q = probes.QueryPort(d.name, p.port);
      int mtu = 0;
      std::string source;
      if (q.ok()) {
        mtu = q->active_mtu;
        source = absl::StrCat("ibv_query_port, max ", q->max_mtu);
      } else if (ethernet && p.netdev_mtu > 0) {
        mtu = RoceMtuForNetdev(p.netdev_mtu);
        source = "derived from the netdev MTU";
      }
      std::string netdev_mtu =
          p.netdev_mtu > 0 ? absl::StrCat(", ", p.netdev, " MTU ", p.netdev_mtu) : "";
      if (mtu == 0) {
        r.Add("rdma.mtu", subject, Verdict::kSkip,
              absl::StrCat("active MTU unknown (", q.status().message(), ")"),
              "run on the host itself with the RDMA driver loaded");
      } else if (ethernet && mtu <= 1024) {
        r.Add("rdma.mtu", subject, Verdict::kWarn,
              absl::StrCat("active MTU ", mtu, " (", source, netdev_mtu, ")"),
              absl::StrCat("raise the netdev MTU to 4200 or 9000 (switch ports too): ip link set ",
                           netdev, " mtu 9000, for 4096-byte RoCE packets"));
      } else {
        r.Add("rdma.mtu", subject, Verdict::kPass,
              absl::StrCat("active MTU ", mtu, " (", source, netdev_mtu, ")"));
      }
    }
    // DC (mlx5 direct verbs).
    absl::StatusOr<DcAnswer> dc = probes.ProbeDc(d.name);
    if (!dc.ok()) {
      r.Add("rdma.dc", d.name, Verdict::kSkip,
            absl::StrCat("not probed: ", dc.status().message()),
            "probe needs the device open with an ACTIVE port on this host");
    } else if (!dc->mlx5) {
      r.Add("rdma.dc", d.name, Verdict::kSkip, dc->why_not,
            "use --transport rc here; dc needs a ConnectX-5 or later");
    } else if (!dc->dc) {
      r.Add("rdma.dc", d.name, Verdict::kWarn, dc->why_not,
            "check the firmware (DC enabled) or use --transport rc");
    } else {
      r.Add("rdma.dc", d.name, Verdict::kPass, "mlx5: a DC initiator was created and destroyed");
    }
    // SR-IOV.
    if (!d.physfn.empty()) {
      r.Add("rdma.sriov", d.name, Verdict::kWarn,
            absl::StrCat("SR-IOV virtual function of ", d.physfn,
                         ": MTU and PFC belong to the PF, QP/MR counts are firmware quotas"),
            "set MTU/PFC on the PF's host; in a VM, check PCIe distance and ACS on the host");
    } else if (!d.pci.empty()) {
      r.Add("rdma.sriov", d.name, Verdict::kPass, "physical function");
    }
  }
}

void CheckMemlock(Probes& probes, Results& r) {
  const Memlock m = probes.ReadMemlock();
  if (m.unlimited) {
    r.Add("memlock", "", Verdict::kPass, "RLIMIT_MEMLOCK unlimited");
    return;
  }
  const std::string value = absl::StrCat("RLIMIT_MEMLOCK ", Size(m.soft_bytes), " (hard ",
                                         m.hard_bytes == UINT64_MAX ? "unlimited"
                                                                    : Size(m.hard_bytes),
                                         ")");
  if (m.cap_ipc_lock) {
    r.Add("memlock", "", Verdict::kPass,
          absl::StrCat(value, ", but CAP_IPC_LOCK lifts it for this process"));
    return;
  }
  r.Add("memlock", "", Verdict::kWarn,
        absl::StrCat(value, ": registered host memory (buffers, volumes) counts against it"),
        "ulimit -l unlimited; for gdrstored's unit LimitMEMLOCK=infinity; for logins "
        "'* - memlock unlimited' in /etc/security/limits.d/");
}

// The NIC GPU buffers on `gpu` use: --rdma-device, else the nearest (the client's rule).
const gdr::topo::Nic* NicFor(const HostFacts& h, const gdr::topo::Gpu& gpu,
                             const CheckOptions& o) {
  if (!o.rdma_device.empty()) {
    for (const gdr::topo::Nic& n : h.topo.nics)
      if (n.name == o.rdma_device) return &n;
    return nullptr;
  }
  absl::StatusOr<const gdr::topo::Nic*> n = gdr::topo::NearestNic(h.topo, gpu.pci.address);
  return n.ok() ? *n : nullptr;
}

void CheckIommu(const HostFacts& h, const std::string& subject, const std::string& address,
                Results& r) {
  const PciDeviceFact* f = h.Pci(address);
  if (f == nullptr) return;
  if (!f->has_iommu_group) {
    r.Add("iommu", subject, Verdict::kPass, "no IOMMU group: the IOMMU is off");
  } else if (f->iommu_type == "identity") {
    r.Add("iommu", subject, Verdict::kPass, "identity (passthrough): DMA is not translated");
  } else if (f->iommu_type == "DMA" || f->iommu_type == "DMA-FQ") {
    r.Add("iommu", subject, Verdict::kWarn,
          absl::StrCat(f->iommu_type, ": every DMA of this device is translated by the IOMMU"),
          "boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on iommu=pt)");
  } else {
    r.Add("iommu", subject, Verdict::kWarn,
          absl::StrCat("IOMMU group type '", f->iommu_type.empty() ? "unreadable" : f->iommu_type,
                       "'"),
          "a device owned by VFIO or blocked cannot serve this host's RDMA; check its driver");
  }
}

void CheckAcs(const HostFacts& h, const std::string& subject, const gdr::topo::Gpu& gpu,
              const gdr::topo::Nic& nic, Results& r) {
  const Relation rel = gdr::topo::Relate(gpu.pci, nic.pci);
  if (rel != Relation::kSameSwitch && rel != Relation::kSameRootPort) {
    r.Add("pcie.acs", subject, Verdict::kSkip,
          absl::StrCat("GPU and ", nic.name,
                       " meet at or above the host bridge: P2P crosses the root complex anyway"),
          "for P2P below the CPU, place GPU and NIC under one PCIe switch");
    return;
  }
  // The bridges P2P traffic passes: where the two paths meet, and each side's below it.
  size_t shared = 0;
  while (shared < gpu.pci.bridges.size() && shared < nic.pci.bridges.size() &&
         gpu.pci.bridges[shared] == nic.pci.bridges[shared]) {
    ++shared;
  }
  std::vector<std::string> path = {gpu.pci.bridges[shared - 1]};
  for (const auto* n : {&gpu.pci, &nic.pci}) {
    path.insert(path.end(), n->bridges.begin() + shared, n->bridges.end());
  }
  std::sort(path.begin(), path.end());
  std::vector<std::string> redirecting, unreadable;
  for (const std::string& b : path) {
    const PciDeviceFact* f = h.Pci(b);
    if (f == nullptr || !f->acs) {
      unreadable.push_back(b);
    } else if (f->acs->request_redirect() || f->acs->completion_redirect()) {
      redirecting.push_back(absl::StrCat(b, " (", f->acs->Describe(), ")"));
    }
  }
  if (!redirecting.empty()) {
    r.Add("pcie.acs", subject, Verdict::kWarn,
          absl::StrCat("ACS redirect on ", absl::StrJoin(redirecting, ", "), ": P2P to ",
                       nic.name, " goes up through the root complex"),
          "on bare metal turn ACS redirect off (BIOS, or setpci -s BRIDGE ECAP_ACS+6.w=0 at "
          "boot); a VM needs it for isolation");
  } else if (!unreadable.empty()) {
    r.Add("pcie.acs", subject, Verdict::kSkip,
          absl::StrCat("config space past 64 bytes of ", absl::StrJoin(unreadable, ", "),
                       " is readable by root only"),
          "run as root to check ACS: sudo gdrctl doctor");
  } else {
    r.Add("pcie.acs", subject, Verdict::kPass,
          absl::StrCat("no ACS redirect on the ", path.size(), " bridge",
                       path.size() == 1 ? "" : "s", " between the GPU and ", nic.name));
  }
}

// What the GPU says of GPUDirect RDMA: whether a NIC may reach its memory at all, and how bytes
// a NIC wrote become visible to the GPU's next work (the client's write fence follows this).
void CheckGpuDirect(Probes& probes, const std::string& subject, int ordinal, Results& r) {
  absl::StatusOr<gdr::cuda::GpuDirectAttributes> a = probes.GpuDirect(ordinal);
  if (!a.ok()) {
    r.Add("gpu.direct", subject, Verdict::kSkip,
          absl::StrCat("attributes not read: ", a.status().message()),
          "run on the host itself with the NVIDIA driver loaded");
    return;
  }
  const std::string found = gdr::cuda::DescribeGpuDirect(*a);
  if (!a->rdma_supported) {
    r.Add("gpu.direct", subject, Verdict::kFail, found,
          "this GPU does not do GPUDirect RDMA: use a data-center GPU, or --transport tcp");
  } else if (gdr::cuda::VisibilityFor(*a) == gdr::cuda::WriteVisibility::kNoGuarantee) {
    r.Add("gpu.direct", subject, Verdict::kWarn, found,
          "update the NVIDIA driver (one that reports a host flush option)");
  } else {
    r.Add("gpu.direct", subject, Verdict::kPass, found);
  }
}

void CheckGpus(const HostFacts& h, Probes& probes, const CheckOptions& o, Results& r) {
  if (o.role == Role::kStorage) {
    r.Add("gpu", "", Verdict::kSkip, "storage host: gdrstored moves host memory only",
          "run the doctor on a client host for the GPU checks");
    return;
  }
  absl::StatusOr<std::vector<CudaGpu>> cuda = probes.ListGpus();
  if (h.topo.gpus.empty() && !cuda.ok()) {
    r.Add("gpu", "", Verdict::kSkip, "no NVIDIA GPU on the PCI bus",
          "nothing to do on a host without GPUs (host memory only)");
    return;
  }
  auto cuda_gpu = [&](const std::string& pci) -> const CudaGpu* {
    if (!cuda.ok()) return nullptr;
    for (const CudaGpu& g : *cuda)
      if (g.pci == pci) return &g;
    return nullptr;
  };
  if (cuda.ok()) {
    std::vector<std::string> list;
    for (const CudaGpu& g : *cuda) {
      list.push_back(absl::StrCat(g.ordinal, " ", g.pci, " ", g.name, " ", Size(g.total_bytes)));
    }
    r.Add("gpu", "", Verdict::kPass,
          absl::StrCat(cuda->size(), " GPU", cuda->size() == 1 ? "" : "s", ": ",
                       absl::StrJoin(list, "; ")));
  } else if (absl::IsUnavailable(cuda.status())) {
    r.Add("gpu", "", Verdict::kSkip,
          absl::StrCat(h.topo.gpus.size(), " GPU(s) on the PCI bus; CUDA not asked: ",
                       cuda.status().message()),
          "run on the host itself for the CUDA view");
  } else {
    r.Add("gpu", "", Verdict::kFail,
          absl::StrCat(h.topo.gpus.size(), " GPU(s) on the PCI bus but CUDA has none: ",
                       cuda.status().message()),
          "install and load the NVIDIA driver (nvidia-smi must list the GPUs)");
  }

  // GPU memory registration: a real registration when there is a GPU and an RDMA device,
  // else what the modules and kernel allow.
  const auto kv = KernelVersion(h.kernel_release);
  const bool kernel_dmabuf = kv && *kv >= std::make_pair(5, 12);
  bool cuda_dmabuf = false;
  if (cuda.ok()) {
    for (const CudaGpu& g : *cuda) cuda_dmabuf |= g.dma_buf;
  }
  const std::string modules = absl::StrCat(
      "nvidia_peermem ", h.module_nvidia_peermem ? "loaded" : "not loaded", ", kernel ",
      h.kernel_release.empty() ? "?" : h.kernel_release, ", NVIDIA module ",
      h.nvidia_driver.empty() ? (h.module_nvidia ? "loaded" : "not loaded")
                              : (h.nvidia_open_module ? "open" : "proprietary"),
      cuda.ok() ? absl::StrCat(", CUDA dma-buf ", cuda_dmabuf ? "yes" : "no") : "");
  const std::string dmabuf_advice = absl::StrCat(
      "use dma-buf: the open NVIDIA kernel module on a kernel >= 5.12",
      h.peer_memory_api ? ", or modprobe nvidia-peermem"
                        : "; modprobe nvidia-peermem cannot work here: it needs MOFED's "
                          "peer-memory API, which stock kernels lack");
  std::optional<absl::StatusOr<std::string>> probe;
  if (cuda.ok() && !cuda->empty() && !h.rdma.empty()) {
    std::string device = o.rdma_device;
    if (device.empty()) {
      for (const gdr::topo::Gpu& g : h.topo.gpus) {
        if (g.pci.address != cuda->front().pci) continue;
        if (const gdr::topo::Nic* n = NicFor(h, g, o)) device = n->name;
      }
    }
    if (device.empty()) device = h.rdma.front().name;
    probe = probes.ProbeGpuRegistration(cuda->front().ordinal, device);
    if (probe->ok()) {
      r.Add("gpu.registration", "", Verdict::kPass,
            absl::StrCat(**probe, ": 2 MiB of GPU ", cuda->front().ordinal, " registered on ",
                         device, " (", modules, ")"));
    } else if (!absl::IsUnavailable(probe->status())) {
      r.Add("gpu.registration", "", Verdict::kFail,
            absl::StrCat("GPU ", cuda->front().ordinal, " on ", device, ": ",
                         probe->status().message()),
            dmabuf_advice);
    }
  }
  if (!probe || absl::IsUnavailable(probe->status())) {
    const std::string why = probe ? absl::StrCat(" (no live probe: ", probe->status().message(),
                                                 ")")
                                  : "";
    const bool dmabuf = kernel_dmabuf && (cuda.ok() ? cuda_dmabuf : h.nvidia_open_module);
    if (h.module_nvidia_peermem || dmabuf) {
      r.Add("gpu.registration", "", Verdict::kPass,
            absl::StrCat(h.module_nvidia_peermem ? "nvidia-peermem" : "dma-buf",
                         " available: ", modules, why));
    } else {
      r.Add("gpu.registration", "", Verdict::kFail,
            absl::StrCat("neither nvidia-peermem nor dma-buf: ", modules, why), dmabuf_advice);
    }
  }

  for (const gdr::topo::Gpu& g : h.topo.gpus) {
    const CudaGpu* cg = cuda_gpu(g.pci.address);
    const std::string subject =
        cg ? absl::StrCat("GPU ", cg->ordinal, " ", g.pci.address)
           : absl::StrCat("GPU ", g.pci.address);
    // Nearest NIC and distance.
    const gdr::topo::Nic* nic = NicFor(h, g, o);
    if (nic == nullptr) {
      r.Add("gpu.nic", subject, Verdict::kSkip,
            o.rdma_device.empty() ? "no RDMA NIC on the PCI bus (software devices have none)"
                                  : absl::StrCat(o.rdma_device, " is not a PCI device here"),
            "GPUDirect RDMA needs a PCIe RDMA NIC (ConnectX) near the GPU");
    } else {
      const Relation rel = gdr::topo::Relate(g.pci, nic->pci);
      const int hops = gdr::topo::Hops(g.pci, nic->pci);
      // Hops count bridges below one host bridge; across host bridges they say nothing.
      const bool one_tree = rel <= Relation::kSameHostBridge;
      const std::string found = absl::StrCat(
          o.rdma_device.empty() ? "nearest NIC " : "NIC in use ", nic->name, " (",
          nic->pci.address, "): ", NvidiaSmiDistance(rel, hops), ", ",
          gdr::topo::RelationName(rel), one_tree ? absl::StrCat(", ", hops, " hops") : "");
      if (rel == Relation::kAcrossSockets) {
        r.Add("gpu.nic", subject, Verdict::kWarn, found,
              "use a NIC on the GPU's socket (--rdma-device) or this NIC's GPUs");
      } else {
        r.Add("gpu.nic", subject, Verdict::kPass, found);
      }
    }
    CheckIommu(h, subject, g.pci.address, r);
    if (nic != nullptr) CheckAcs(h, subject, g, *nic, r);
    if (cg) CheckGpuDirect(probes, subject, cg->ordinal, r);
    // BAR1.
    const PciDeviceFact* f = h.Pci(g.pci.address);
    const uint64_t bar1 = f ? f->bar1_bytes : 0;
    if (bar1 == 0) {
      r.Add("gpu.bar1", subject, Verdict::kSkip, "BAR1 not readable from resource",
            "check `nvidia-smi -q -d MEMORY` (BAR1 Memory Usage)");
    } else if (bar1 < kSmallBar1) {
      r.Add("gpu.bar1", subject, Verdict::kWarn,
            absl::StrCat("BAR1 ", Size(bar1), ": RDMA registrations of GPU memory map through "
                                              "it and will not fit"),
            "enable Above 4G Decoding and Resizable BAR in the BIOS");
    } else {
      std::string found = absl::StrCat("BAR1 ", Size(bar1));
      if (cg && cg->total_bytes > bar1) {
        absl::StrAppend(&found, ": registrations can map ", Size(bar1), " of ",
                        Size(cg->total_bytes), " at once");
      }
      r.Add("gpu.bar1", subject, Verdict::kPass, found);
    }
  }
}

void CheckNicIommu(const HostFacts& h, Results& r) {
  for (const gdr::topo::Nic& n : h.topo.nics) {
    CheckIommu(h, absl::StrCat(n.name, " ", n.pci.address), n.pci.address, r);
  }
}

void CheckArp(const HostFacts& h, Results& r) {
  std::vector<const NetdevFact*> with_ip;
  for (const NetdevFact& n : h.rdma_netdevs)
    if (!n.ipv4.empty()) with_ip.push_back(&n);
  if (with_ip.size() < 2) {
    r.Add("net.arp", "", Verdict::kSkip,
          with_ip.empty() ? "no RDMA interface with an IPv4 address"
                          : absl::StrCat("one RDMA interface with IPv4 (", with_ip[0]->name,
                                         "): not multi-homed"),
          "nothing to do: ARP settings matter with two or more RDMA interfaces");
    return;
  }
  std::vector<std::string> names;
  for (const NetdevFact* n : with_ip) names.push_back(n->name);
  const std::string homes = absl::StrCat("multi-homed: ", absl::StrJoin(names, ", "));
  for (const NetdevFact* n : with_ip) {
    const int ignore = n->arp.arp_ignore, announce = n->arp.arp_announce;
    const std::string found = absl::StrCat(
        "arp_ignore ", ignore < 0 ? "unreadable" : std::to_string(ignore), ", arp_announce ",
        announce < 0 ? "unreadable" : std::to_string(announce), " (", homes, ")");
    if ((ignore == 1 || ignore == 2) && announce == 2) {
      r.Add("net.arp", n->name, Verdict::kPass, found);
    } else {
      const std::string key = SysctlName(n->name);
      r.Add("net.arp", n->name, Verdict::kWarn,
            absl::StrCat(found, ": ARP replies for ", n->name, "'s address may leave another port"),
            absl::StrCat("in /etc/sysctl.d/: net.ipv4.conf.", key, ".arp_ignore = 1 and net.ipv4.conf.",
                         key, ".arp_announce = 2"));
    }
  }
}

void CheckDaemon(Probes& probes, const CheckOptions& o, Results& r) {
  absl::StatusOr<DaemonOffer> d = probes.GetInfo(o.daemon_address);
  if (!d.ok()) {
    const std::string found = absl::StrCat("no daemon at ", o.daemon_address, ": ",
                                           absl::StatusCodeToString(d.status().code()), ": ",
                                           d.status().message());
    if (o.daemon_explicit) {
      r.Add("daemon", o.daemon_address, Verdict::kFail, found,
            "start gdrstored there, or check the address, firewall and --token-file");
    } else {
      r.Add("daemon", o.daemon_address, Verdict::kSkip, found,
            "give --daemon HOST:PORT to check a daemon elsewhere");
    }
    return;
  }
  std::vector<std::string> offers, missing;
  bool rdma = false;
  for (const DaemonTransport& t : d->transports) {
    if (t.available) {
      offers.push_back(t.name);
      rdma |= t.name != "tcp";
    } else {
      missing.push_back(absl::StrCat(t.name, " unavailable (", t.detail, ")"));
    }
  }
  std::string found = absl::StrCat("gdrstored ", d->version, " offers ", absl::StrJoin(offers, ", "));
  if (d->has_rdma) {
    absl::StrAppend(&found, "; ", d->rdma_device, " port ", d->rdma_port, " ", d->port_state, " ",
                    d->link_layer, ", GID ", d->gid, ", MTU ", d->mtu);
  }
  if (!missing.empty()) absl::StrAppend(&found, "; ", absl::StrJoin(missing, "; "));
  if (rdma) {
    r.Add("daemon", o.daemon_address, Verdict::kPass, found);
  } else {
    r.Add("daemon", o.daemon_address, Verdict::kWarn, found,
          "start gdrstored with --rdma-device or --rdma-addr on an ACTIVE RDMA port for rc/dc");
  }
}

}  // namespace

const char* NvidiaSmiDistance(Relation relation, int hops) {
  switch (relation) {
    case Relation::kSameSwitch:
      // Siblings below one switch: each side crosses its own downstream port only (4 hops).
      return hops <= 4 ? "PIX" : "PXB";
    case Relation::kSameRootPort: return "PXB";
    case Relation::kSameHostBridge: return "PHB";
    case Relation::kSameNumaNode: return "NODE";
    case Relation::kAcrossSockets: return "SYS";
  }
  return "?";
}

std::vector<CheckResult> RunChecks(const HostFacts& facts, Probes& probes,
                                   const CheckOptions& options) {
  Results r;
  CheckRdma(facts, probes, r);
  CheckNicIommu(facts, r);
  CheckMemlock(probes, r);
  CheckGpus(facts, probes, options, r);
  CheckArp(facts, r);
  CheckDaemon(probes, options, r);
  std::vector<CheckResult> out = r.Take();
  if (!options.needs_rdma) {
    for (CheckResult& c : out) {
      const bool rdma_path = absl::StartsWith(c.check, "rdma.") || c.check == "iommu" ||
                             c.check == "pcie.acs" || c.check == "net.arp" ||
                             (absl::StartsWith(c.check, "gpu.") && c.check != "gpu");
      if (rdma_path && (c.verdict == Verdict::kFail || c.verdict == Verdict::kWarn)) {
        c.verdict = Verdict::kSkip;
        c.advice = absl::StrCat("not needed with --needs tcp (the GPU-direct RDMA path only)");
      }
    }
  }
  return out;
}

}  // namespace gdrctl::doctor
