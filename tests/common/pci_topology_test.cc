// gdr_topo against the fake sysfs tree in tests/data/sysfs-2sw (two NICs, four GPUs, two PCIe
// switches, plus devices that must be ignored), and the relation rules on hand-made paths.
#include "common/topo/pci_topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gdr::topo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kTree = std::string(GDR_SOURCE_DIR) + "/tests/data/sysfs-2sw";

const Gpu& GpuAt(const Topology& t, const std::string& pci) {
  for (const Gpu& g : t.gpus)
    if (g.pci.address == pci) return g;
  ADD_FAILURE() << "no GPU " << pci;
  static Gpu none;
  return none;
}

TEST(PciTopology, ReadsNicsAndGpusFromFakeTree) {
  absl::StatusOr<Topology> t = ReadTopology(kTree);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->nics.size(), 2u);  // rxe0 has no PCI parent
  EXPECT_EQ(t->nics[0].name, "mlx5_0");
  EXPECT_EQ(t->nics[0].pci.address, "0000:03:00.0");
  EXPECT_EQ(t->nics[0].pci.host_bridge, "pci0000:00");
  EXPECT_THAT(t->nics[0].pci.bridges, ElementsAre("0000:00:01.0", "0000:01:00.0", "0000:02:00.0"));
  EXPECT_EQ(t->nics[0].pci.numa_node, 0);
  EXPECT_EQ(t->nics[1].name, "mlx5_1");
  EXPECT_EQ(t->nics[1].pci.numa_node, 1);
  std::vector<std::string> gpus;
  for (const Gpu& g : t->gpus) gpus.push_back(g.pci.address);
  // The NVMe drive and the NVIDIA bridge-class device are not GPUs.
  EXPECT_THAT(gpus, ElementsAre("0000:04:00.0", "0000:05:00.0", "0000:84:00.0", "0000:c1:00.0"));
  EXPECT_EQ(GpuAt(*t, "0000:c1:00.0").pci.path(), "pci0000:c0/0000:c0:01.0/0000:c1:00.0");
}

TEST(PciTopology, RelationsAndNearestNic) {
  absl::StatusOr<Topology> t = ReadTopology(kTree);
  ASSERT_TRUE(t.ok()) << t.status();
  const PciNode& nic0 = t->nics[0].pci;
  const PciNode& nic1 = t->nics[1].pci;
  EXPECT_EQ(Relate(GpuAt(*t, "0000:04:00.0").pci, nic0), Relation::kSameSwitch);
  EXPECT_EQ(Relate(GpuAt(*t, "0000:04:00.0").pci, nic1), Relation::kAcrossSockets);
  EXPECT_EQ(Relate(GpuAt(*t, "0000:84:00.0").pci, nic1), Relation::kSameSwitch);
  EXPECT_EQ(Relate(GpuAt(*t, "0000:c1:00.0").pci, nic1), Relation::kSameNumaNode);
  EXPECT_EQ(Relate(GpuAt(*t, "0000:c1:00.0").pci, nic0), Relation::kAcrossSockets);
  EXPECT_EQ((*NearestNic(*t, "0000:04:00.0"))->name, "mlx5_0");
  EXPECT_EQ((*NearestNic(*t, "0000:05:00.0"))->name, "mlx5_0");
  EXPECT_EQ((*NearestNic(*t, "0000:84:00.0"))->name, "mlx5_1");
  EXPECT_EQ((*NearestNic(*t, "0000:c1:00.0"))->name, "mlx5_1");
  EXPECT_EQ(NearestNic(*t, "0000:99:00.0").status().code(), absl::StatusCode::kNotFound);
}

TEST(PciTopology, RootPortAndHostBridgeRelations) {
  PciNode a{"0000:03:00.0", "pci0000:00", {"0000:00:01.0", "0000:01:00.0", "0000:02:00.0"}, 0};
  PciNode same_root_port{"0000:05:00.0", "pci0000:00", {"0000:00:01.0", "0000:04:00.0"}, 0};
  PciNode same_host_bridge{"0000:06:00.0", "pci0000:00", {"0000:00:02.0"}, 0};
  PciNode other_numa_unknown{"0000:c1:00.0", "pci0000:c0", {"0000:c0:01.0"}, -1};
  EXPECT_EQ(Relate(a, same_root_port), Relation::kSameRootPort);
  EXPECT_EQ(Relate(a, same_host_bridge), Relation::kSameHostBridge);
  EXPECT_EQ(Relate(a, other_numa_unknown), Relation::kAcrossSockets);
  // Same switch, fewer hops wins.
  PciNode near{"0000:07:00.0", "pci0000:00", {"0000:00:01.0", "0000:01:00.0", "0000:02:00.0"}, 0};
  PciNode far{"0000:09:00.0", "pci0000:00",
              {"0000:00:01.0", "0000:01:00.0", "0000:02:03.0", "0000:08:00.0"}, 0};
  EXPECT_LT(Hops(a, near), Hops(a, far));
}

TEST(PciTopology, NotASysfsTree) {
  EXPECT_EQ(ReadTopology("/nonexistent-sysfs").status().code(), absl::StatusCode::kNotFound);
}

TEST(PciTopology, ReportNamesEveryPair) {
  absl::StatusOr<Topology> t = ReadTopology(kTree);
  ASSERT_TRUE(t.ok());
  const std::string text = FormatTopology(*t);
  EXPECT_THAT(text, HasSubstr("0000:04:00.0   SW         SYS        mlx5_0 (same switch)"));
  EXPECT_THAT(text, HasSubstr("0000:c1:00.0   SYS        NODE       mlx5_1 (same NUMA node)"));
  const std::string json = TopologyJson(*t);
  EXPECT_THAT(json, HasSubstr("\"pci\":\"0000:84:00.0\",\"numa_node\":1"));
  EXPECT_THAT(json, HasSubstr("\"nics\":{\"mlx5_0\":\"across sockets\",\"mlx5_1\":\"same switch\"},"
                              "\"nearest_nic\":\"mlx5_1\""));
}

}  // namespace
}  // namespace gdr::topo
