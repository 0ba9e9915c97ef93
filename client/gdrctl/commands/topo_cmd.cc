// `gdrctl topo`: RDMA devices and GPUs on the PCIe tree, their relation, and the rail each GPU
// uses (with a warning where that rail is across sockets); CUDA's view of the GPUs on this host.
#include <algorithm>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/gdrctl/command.h"
#include "common/base/units.h"
#include "common/cuda/gpu.h"
#include "common/cuda/gpu_direct.h"
#include "common/topo/pci_topology.h"

namespace gdrctl {
namespace {

// topo --rails: a comma list of RDMA devices of the tree, or empty / auto for every one of them.
absl::StatusOr<std::vector<std::string>> TopoRails(const gdr::topo::Topology& topo,
                                                   const std::string& list,
                                                   const std::string& sysfs_root) {
  const std::vector<std::string> all = gdr::topo::AllNicNames(topo);
  if (list.empty() || list == "auto") return all;
  std::vector<std::string> rails;
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    rails.emplace_back(absl::StripAsciiWhitespace(name));
  }
  if (rails.empty()) return absl::InvalidArgumentError("--rails: no device named");
  for (size_t i = 0; i < rails.size(); ++i) {
    if (std::find(all.begin(), all.end(), rails[i]) == all.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rails: no RDMA device '", rails[i], "' in ", sysfs_root,
          "/class/infiniband (there: ", all.empty() ? "none" : absl::StrJoin(all, ", "), ")"));
    }
    if (std::find(rails.begin(), rails.begin() + i, rails[i]) != rails.begin() + i) {
      return absl::InvalidArgumentError(absl::StrCat("--rails: '", rails[i], "' named twice"));
    }
  }
  return rails;
}

// topo: NICs and GPUs on the PCIe tree, their relation, and the rail a client with `rails_list`
// uses for each GPU (with a warning where that rail is across sockets).
int RunTopo(bool json, const std::string& sysfs_root, const std::string& rails_list) {
  auto topo = gdr::topo::ReadTopology(sysfs_root);
  if (!topo.ok()) return Fail(topo.status(), "topo");
  absl::StatusOr<std::vector<std::string>> rails = TopoRails(*topo, rails_list, sysfs_root);
  if (!rails.ok()) return Fail(kExitUsage, std::string(rails.status().message()));
  if (json) {
    std::cout << gdr::topo::TopologyJson(*topo, *rails) << "\n";
    return kExitOk;
  }
  std::cout << gdr::topo::FormatTopology(*topo, *rails);
  if (sysfs_root == "/sys") {
    // CUDA's view, so ordinals can be matched with PCI addresses.
    auto gpus = gdr::cuda::ListGpus();
    if (gpus.ok()) {
      std::cout << "CUDA devices:\n";
      for (const auto& g : *gpus) {
        std::cout << absl::StrFormat("  %d  %s  %s, %s, dma-buf %s\n", g.ordinal, g.pci, g.name,
                                     gdr::FormatSize(g.total_bytes),
                                     g.dma_buf ? "supported" : "not supported");
        absl::StatusOr<gdr::cuda::GpuDirectAttributes> gd =
            gdr::cuda::ReadGpuDirectAttributes(g.ordinal);
        std::cout << "     "
                  << (gd.ok() ? gdr::cuda::DescribeGpuDirect(*gd)
                              : std::string(gd.status().message()))
                  << "\n";
      }
    } else {
      std::cout << "CUDA devices: " << gpus.status().message() << "\n";
    }
  }
  return kExitOk;
}

class TopoCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* topo = app.add_subcommand(
        "topo", "RDMA devices and GPUs on the PCIe tree, and the rail each GPU uses");
    topo->add_option("--sysfs-root", sysfs_root_, "sysfs to read (a copy or fake tree for tests)")
        ->capture_default_str();
    topo->add_option("--rails", rails_,
                     "the client's rails, a comma list of RDMA devices (default or auto: every "
                     "one in the tree; port state is not checked): the rail each GPU uses");
    return topo;
  }

  int Run(const Context& ctx) override { return RunTopo(ctx.global.json, sysfs_root_, rails_); }

 private:
  std::string sysfs_root_ = "/sys";
  std::string rails_;
};

}  // namespace

std::unique_ptr<Command> NewTopoCommand() { return std::make_unique<TopoCommand>(); }

}  // namespace gdrctl
