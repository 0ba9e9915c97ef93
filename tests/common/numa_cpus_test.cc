// The CPUs of a NUMA node from a (fake) sysfs tree, and the kernel's cpulist format.
#include "common/topo/numa_cpus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace gdr::topo {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ParseCpuListTest, RangesAndSinglesSortedOnce) {
  absl::StatusOr<std::vector<int>> c = ParseCpuList("0-3,8,10-11\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(*c, ElementsAre(0, 1, 2, 3, 8, 10, 11));
  c = ParseCpuList("5,2-3,3");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(*c, ElementsAre(2, 3, 5));
  c = ParseCpuList("\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(*c, IsEmpty());
}

TEST(ParseCpuListTest, BadPiecesAreNamed) {
  for (const char* bad : {"0-", "a", "3-1", "1-2-3", "-1", "0,x", "99999999"}) {
    absl::StatusOr<std::vector<int>> c = ParseCpuList(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(c.status().message(), HasSubstr("cpu list piece")) << bad;
  }
}

TEST(FormatCpuListTest, RangesAsTheKernelWritesThem) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({5, 3, 4, 4}), "3-5");
  EXPECT_EQ(FormatCpuList({7}), "7");
  EXPECT_EQ(FormatCpuList({}), "");
  absl::StatusOr<std::vector<int>> back = ParseCpuList(FormatCpuList({0, 2, 3, 4, 9}));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(*back, ElementsAre(0, 2, 3, 4, 9));
}

class NumaNodeCpusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "numa_cpus_test.XXXXXX");
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Node(int n, const std::string& cpulist) {
    const std::filesystem::path dir =
        root_ / "devices/system/node" / ("node" + std::to_string(n));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "cpulist") << cpulist;
  }
  std::filesystem::path root_;
};

TEST_F(NumaNodeCpusTest, ReadsTheNodesCpulist) {
  Node(0, "0-3,8-11\n");
  Node(1, "4-7,12-15\n");
  absl::StatusOr<std::vector<int>> c = NumaNodeCpus(root_.string(), 1);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(*c, ElementsAre(4, 5, 6, 7, 12, 13, 14, 15));
}

TEST_F(NumaNodeCpusTest, AMemoryOnlyNodeHasNoCpus) {
  Node(2, "\n");
  absl::StatusOr<std::vector<int>> c = NumaNodeCpus(root_.string(), 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(*c, IsEmpty());
}

TEST_F(NumaNodeCpusTest, AMissingOrUnknownNodeIsNotFound) {
  Node(0, "0-1\n");
  EXPECT_EQ(NumaNodeCpus(root_.string(), 3).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(NumaNodeCpus(root_.string(), -1).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(NumaNodeCpusTest, ACorruptFileNamesItself) {
  Node(0, "zero\n");
  absl::StatusOr<std::vector<int>> c = NumaNodeCpus(root_.string(), 0);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("node0/cpulist"));
}

}  // namespace
}  // namespace gdr::topo
