// gdr_topo against the fake sysfs tree in tests/data/sysfs-2sw (two NICs, four GPUs, two PCIe
// switches, plus devices that must be ignored), the relation rules on hand-made paths, and the
// ranking of a client's rails on a DGX H100-like node (8 GPUs, 8 NICs, two sockets) written by
// tests/common/fake_sysfs.
#include "common/topo/pci_topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "tests/common/fake_sysfs.h"

namespace gdr::topo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fake = ::gdr::topo::testing;

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
  EXPECT_THAT(t->off_tree_nics, ElementsAre("rxe0"));
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
  const std::string text = FormatTopology(*t, AllNicNames(*t));
  EXPECT_THAT(text, HasSubstr("  rxe0       not on the PCI tree (a software device)\n"));
  EXPECT_THAT(text, HasSubstr("Rails: mlx5_0, mlx5_1, rxe0\n"));
  EXPECT_THAT(text, HasSubstr("0000:04:00.0   SW         SYS        mlx5_0 (same switch)"));
  EXPECT_THAT(text, HasSubstr("0000:c1:00.0   SYS        NODE       mlx5_1 (same NUMA node)"));
  EXPECT_THAT(text, Not(HasSubstr("warning")));
  const std::string json = TopologyJson(*t, AllNicNames(*t));
  EXPECT_THAT(json, HasSubstr("\"pci\":\"0000:84:00.0\",\"numa_node\":1"));
  EXPECT_THAT(json, HasSubstr("\"nics\":{\"mlx5_0\":\"across sockets\",\"mlx5_1\":\"same switch\"},"
                              "\"nearest_nic\":\"mlx5_1\",\"rail\":{\"name\":\"mlx5_1\","
                              "\"relation\":\"same switch\",\"hops\":4}}"));
  EXPECT_THAT(json, HasSubstr("\"off_tree_nics\":[\"rxe0\"],\"rails\":[\"mlx5_0\",\"mlx5_1\","
                              "\"rxe0\"]"));
}

// The software device is the only rail: every GPU gets it, its place unknown, no warning.
TEST(PciTopology, ReportWithOnlyAnOffTreeRail) {
  absl::StatusOr<Topology> t = ReadTopology(kTree);
  ASSERT_TRUE(t.ok());
  const std::string text = FormatTopology(*t, {"rxe0"});
  EXPECT_THAT(text, HasSubstr("0000:84:00.0   SYS        SW         rxe0 (not on the PCI tree)"));
  EXPECT_THAT(text, Not(HasSubstr("warning")));
  EXPECT_THAT(TopologyJson(*t, {"rxe0"}),
              HasSubstr("\"nearest_nic\":\"mlx5_1\",\"rail\":{\"name\":\"rxe0\","
                        "\"relation\":\"unknown\"}}"));
}

// The DGX H100-like node, written fresh for each test.
class DgxTopology : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = absl::StrCat(::testing::TempDir(), "/dgx-sysfs-", ::getpid(), "-",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    fake::WriteDgxH100Node(root_);
    Read();
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Read() {
    absl::StatusOr<Topology> t = ReadTopology(root_);
    ASSERT_TRUE(t.ok()) << t.status();
    topo_ = *std::move(t);
  }
  // mlx5_<first> .. mlx5_<last>
  static std::vector<std::string> Nics(int first, int last) {
    std::vector<std::string> v;
    for (int i = first; i <= last; ++i) v.push_back(fake::kDgxNics[i]);
    return v;
  }
  std::string root_;
  Topology topo_;
};

TEST_F(DgxTopology, ReadsEightGpusAndEightNicsOnTwoSockets) {
  ASSERT_EQ(topo_.gpus.size(), 8u);
  ASSERT_EQ(topo_.nics.size(), 8u);
  EXPECT_TRUE(topo_.off_tree_nics.empty());
  for (int i = 0; i < fake::kDgxSwitches; ++i) {
    EXPECT_EQ(topo_.gpus[i].pci.address, fake::kDgxGpus[i]);
    EXPECT_EQ(topo_.gpus[i].device_id, "0x2330");
    EXPECT_EQ(topo_.gpus[i].pci.numa_node, fake::DgxSocketOf(i));
    EXPECT_EQ(topo_.nics[i].name, fake::kDgxNics[i]);
    EXPECT_EQ(topo_.nics[i].pci.address, fake::kDgxNicAddresses[i]);
    EXPECT_EQ(topo_.nics[i].pci.numa_node, fake::DgxSocketOf(i));
  }
  EXPECT_EQ(topo_.gpus[4].pci.path(),
            "pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:00.0/0000:9a:00.0");
  EXPECT_EQ(topo_.nics[4].pci.path(),
            "pci0000:97/0000:97:01.0/0000:98:00.0/0000:99:01.0/0000:9b:00.0");
}

TEST_F(DgxTopology, EveryGpuGetsTheNicBehindItsSwitch) {
  const std::vector<std::string> all = Nics(0, 7);
  for (int i = 0; i < fake::kDgxSwitches; ++i) {
    SCOPED_TRACE(fake::kDgxGpus[i]);
    absl::StatusOr<NicChoice> c = ChooseNic(topo_, fake::kDgxGpus[i], all);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->rank.name, fake::kDgxNics[i]);
    ASSERT_TRUE(c->rank.known());
    EXPECT_EQ(c->rank.nic->pci.address, fake::kDgxNicAddresses[i]);
    EXPECT_EQ(c->rank.relation, Relation::kSameSwitch);
    EXPECT_EQ(c->rank.hops, 4);  // GPU -> its downstream port -> upstream port -> NIC's port
    EXPECT_EQ(c->warning, "");
    absl::StatusOr<const Nic*> nearest = NearestNic(topo_, fake::kDgxGpus[i]);
    ASSERT_TRUE(nearest.ok()) << nearest.status();
    EXPECT_EQ((*nearest)->name, fake::kDgxNics[i]);

    // The whole order: its switch's NIC, the other three of its socket (each on its own root
    // complex: NODE), then the other socket's four, each group in the order given.
    std::vector<std::string> order;
    std::vector<Relation> relations;
    for (const NicRank& r : RankNics(topo_, fake::kDgxGpus[i], all)) {
      order.push_back(r.name);
      relations.push_back(r.relation);
    }
    const int s = fake::DgxSocketOf(i);
    std::vector<std::string> want = {fake::kDgxNics[i]};
    for (int j = 0; j < 8; ++j)
      if (j != i && fake::DgxSocketOf(j) == s) want.push_back(fake::kDgxNics[j]);
    for (int j = 0; j < 8; ++j)
      if (fake::DgxSocketOf(j) != s) want.push_back(fake::kDgxNics[j]);
    EXPECT_EQ(order, want);
    EXPECT_THAT(relations, ElementsAre(Relation::kSameSwitch, Relation::kSameNumaNode,
                                       Relation::kSameNumaNode, Relation::kSameNumaNode,
                                       Relation::kAcrossSockets, Relation::kAcrossSockets,
                                       Relation::kAcrossSockets, Relation::kAcrossSockets));
  }
}

TEST_F(DgxTopology, OnlySocketZeroRailsPutSocketOneGpusAcrossSocketsWithAWarning) {
  const std::vector<std::string> socket0 = Nics(0, 3);
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<NicChoice> c = ChooseNic(topo_, fake::kDgxGpus[i], socket0);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->rank.name, fake::kDgxNics[i]);
    EXPECT_EQ(c->rank.relation, Relation::kSameSwitch);
    EXPECT_EQ(c->warning, "");
  }
  for (int i = 4; i < 8; ++i) {
    SCOPED_TRACE(fake::kDgxGpus[i]);
    absl::StatusOr<NicChoice> c = ChooseNic(topo_, fake::kDgxGpus[i], socket0);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(c->rank.known());
    // All four are as far: the first given wins.
    EXPECT_EQ(c->rank.name, "mlx5_0");
    EXPECT_EQ(c->rank.relation, Relation::kAcrossSockets);
    EXPECT_THAT(c->warning, HasSubstr(fake::kDgxGpus[i]));
    EXPECT_THAT(c->warning, HasSubstr("mlx5_0"));
    EXPECT_THAT(c->warning, HasSubstr(fake::kDgxNics[i]));  // the one it should have had
  }
  absl::StatusOr<NicChoice> c = ChooseNic(topo_, "0000:9a:00.0", socket0);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->warning,
            "GPU 0000:9a:00.0 has no NIC on its NUMA node (1) among mlx5_0,mlx5_1,mlx5_2,mlx5_3; "
            "using mlx5_0 across sockets (SYS); mlx5_4 (same switch) is nearer but not among "
            "them");
  // The order given decides among equals.
  c = ChooseNic(topo_, "0000:9a:00.0", {"mlx5_2", "mlx5_0", "mlx5_3", "mlx5_1"});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rank.name, "mlx5_2");
}

TEST_F(DgxTopology, NoSwitchNicMeansTheSameNumaNodeBeforeTheOtherSocket) {
  // mlx5_5 left out of the rails: GPU 5 takes a NIC of socket 1, though socket 0's come first
  // in the list.
  std::vector<std::string> rails = Nics(0, 7);
  rails.erase(rails.begin() + 5);
  absl::StatusOr<NicChoice> c = ChooseNic(topo_, fake::kDgxGpus[5], rails);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank.name, "mlx5_4");
  EXPECT_EQ(c->rank.relation, Relation::kSameNumaNode);
  EXPECT_EQ(c->warning, "");
  std::vector<Relation> relations;
  for (const NicRank& r : RankNics(topo_, fake::kDgxGpus[5], rails)) {
    relations.push_back(r.relation);
  }
  EXPECT_THAT(relations, ElementsAre(Relation::kSameNumaNode, Relation::kSameNumaNode,
                                     Relation::kSameNumaNode, Relation::kAcrossSockets,
                                     Relation::kAcrossSockets, Relation::kAcrossSockets,
                                     Relation::kAcrossSockets));

  // The same with the NIC gone from the tree (removed, or its driver not bound).
  std::filesystem::remove(root_ + "/class/infiniband/mlx5_5");
  Read();
  ASSERT_EQ(topo_.nics.size(), 7u);
  absl::StatusOr<const Nic*> nearest = NearestNic(topo_, fake::kDgxGpus[5]);
  ASSERT_TRUE(nearest.ok()) << nearest.status();
  EXPECT_EQ((*nearest)->name, "mlx5_4");
  EXPECT_EQ(Relate(GpuAt(topo_, fake::kDgxGpus[5]).pci, (*nearest)->pci),
            Relation::kSameNumaNode);
}

TEST_F(DgxTopology, NamesNotOnTheTreeRankLast) {
  const std::vector<NicRank> r =
      RankNics(topo_, fake::kDgxGpus[0], {"rxe0", "mlx5_7", "mlx5_9", "mlx5_1", "mlx5_0"});
  std::vector<std::string> order;
  for (const NicRank& n : r) order.push_back(n.name);
  EXPECT_THAT(order, ElementsAre("mlx5_0", "mlx5_1", "mlx5_7", "rxe0", "mlx5_9"));
  EXPECT_TRUE(r[2].known());
  EXPECT_FALSE(r[3].known());
  EXPECT_FALSE(r[4].known());
  EXPECT_EQ(r[3].nic, nullptr);

  // Only unknown names: the first given is the choice, with nothing to warn about.
  absl::StatusOr<NicChoice> c = ChooseNic(topo_, fake::kDgxGpus[6], {"rxe1", "rxe0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank.name, "rxe1");
  EXPECT_FALSE(c->rank.known());
  EXPECT_EQ(c->warning, "");

  // A GPU not on the tree: nothing is known, the order given stands; choosing is an error.
  std::vector<std::string> order2;
  for (const NicRank& n : RankNics(topo_, "0000:07:00.0", {"mlx5_6", "mlx5_0"})) {
    EXPECT_FALSE(n.known());
    order2.push_back(n.name);
  }
  EXPECT_THAT(order2, ElementsAre("mlx5_6", "mlx5_0"));
  EXPECT_EQ(ChooseNic(topo_, "0000:07:00.0", {"mlx5_0"}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ChooseNic(topo_, fake::kDgxGpus[0], {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(DgxTopology, ReportShowsEachGpusRailAndWarnsAcrossSockets) {
  const std::string text = FormatTopology(topo_, Nics(0, 3));
  EXPECT_THAT(text, HasSubstr("Rails: mlx5_0, mlx5_1, mlx5_2, mlx5_3\n"));
  EXPECT_THAT(text, HasSubstr("  0000:2a:00.0   NODE       SW         NODE       NODE       SYS   "
                              "     SYS        SYS        SYS        mlx5_1 (same switch)\n"));
  EXPECT_THAT(text, HasSubstr("  0000:db:00.0   SYS        SYS        SYS        SYS        NODE  "
                              "     NODE       NODE       SW         mlx5_0 (across sockets)\n"));
  EXPECT_THAT(text, HasSubstr("warning: GPU 0000:ab:00.0 has no NIC on its NUMA node (1)"));
  size_t warnings = 0;
  for (size_t at = text.find("warning: "); at != std::string::npos;
       at = text.find("warning: ", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 4u);  // one per socket-1 GPU
  EXPECT_THAT(FormatTopology(topo_, Nics(0, 7)), Not(HasSubstr("warning")));
  EXPECT_THAT(TopologyJson(topo_, Nics(0, 3)),
              HasSubstr("\"nearest_nic\":\"mlx5_6\",\"rail\":{\"name\":\"mlx5_0\","
                        "\"relation\":\"across sockets\",\"hops\":8},\"rail_warning\":"
                        "\"GPU 0000:ba:00.0 has no NIC on its NUMA node (1) among "));
}

}  // namespace
}  // namespace gdr::topo
