// gdrctl's GPU surface as a user meets it: `topo` against the fake sysfs tree (two NICs, four
// GPUs, two switches) and, with --rails, a DGX H100-like one; --gpu names that are malformed
// (usage error, exit 2), and --gpu on a host without a GPU driver (exit 1, one line naming what
// is missing) while host memory keeps working in the same binary. On a GPU host the no-driver
// case is skipped and a verified write into GPU memory runs instead.
#include <gtest/gtest.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cuda/gpu.h"
#include "tests/common/fake_sysfs.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

class GdrctlGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("gdrctl-gpu");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
  }
  ProcessResult Gdrctl(std::vector<std::string> args) {
    // $GDR_GDRCTL_BIN overrides the built path (test binaries carried to a GPU host).
    const char* env = std::getenv("GDR_GDRCTL_BIN");
    std::vector<std::string> argv = {env != nullptr && *env != '\0' ? env : GDR_GDRCTL_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunProcess(argv, dir_->path(), absl::StrCat("run", runs_++), absl::Seconds(60));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ProcessResult{};
  }
  std::unique_ptr<TempDir> dir_;
  int runs_ = 0;
};

const std::string kTree = std::string(GDR_SOURCE_DIR) + "/tests/data/sysfs-2sw";

TEST_F(GdrctlGpuTest, TopoOnFakeTree) {
  ProcessResult r = Gdrctl({"topo", "--sysfs-root", kTree});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const std::string expected =
      "RDMA devices:\n"
      "  mlx5_0     0000:03:00.0  numa 0  "
      "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0\n"
      "  mlx5_1     0000:83:00.0  numa 1  "
      "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:00.0/0000:83:00.0\n"
      "  rxe0       not on the PCI tree (a software device)\n"
      "GPUs:\n"
      "  0x2330     0000:04:00.0  numa 0  "
      "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0\n"
      "  0x2330     0000:05:00.0  numa 0  "
      "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:02.0/0000:05:00.0\n"
      "  0x2330     0000:84:00.0  numa 1  "
      "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:01.0/0000:84:00.0\n"
      "  0x2330     0000:c1:00.0  numa 1  pci0000:c0/0000:c0:01.0/0000:c1:00.0\n"
      "Rails: mlx5_0, mlx5_1, rxe0\n"
      "GPU to NIC (SW same switch, RP same root port, HB same host bridge, NODE same NUMA "
      "node, SYS across sockets), and the rail a client uses for the GPU:\n"
      "                 mlx5_0     mlx5_1     rail\n"
      "  0000:04:00.0   SW         SYS        mlx5_0 (same switch)\n"
      "  0000:05:00.0   SW         SYS        mlx5_0 (same switch)\n"
      "  0000:84:00.0   SYS        SW         mlx5_1 (same switch)\n"
      "  0000:c1:00.0   SYS        NODE       mlx5_1 (same NUMA node)\n";
  EXPECT_EQ(r.out, expected);

  r = Gdrctl({"--json", "topo", "--sysfs-root", kTree});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(
      r.out, "\"pci\":\"0000:c1:00.0\",\"numa_node\":1,\"path\":\"pci0000:c0/0000:c0:01.0/"
             "0000:c1:00.0\",\"device_id\":\"0x2330\",\"nics\":{\"mlx5_0\":\"across sockets\","
             "\"mlx5_1\":\"same NUMA node\"},\"nearest_nic\":\"mlx5_1\""))
      << r.out;
}

// A DGX H100-like node (tests/common/fake_sysfs: 8 GPUs, 8 NICs, a GPU and a NIC per switch,
// four switches per socket): every GPU's rail is the NIC on its switch; with socket 0's NICs
// as the only rails, socket 1's GPUs cross sockets and each gets a warning naming GPU and NIC.
TEST_F(GdrctlGpuTest, TopoRailsOnADgxNode) {
  const std::string tree = dir_->File("dgx-sysfs");
  gdr::topo::testing::WriteDgxH100Node(tree);
  ProcessResult r = Gdrctl({"topo", "--sysfs-root", tree});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(
      r.out, "Rails: mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7\n"))
      << r.out;
  for (int i = 0; i < gdr::topo::testing::kDgxSwitches; ++i) {
    EXPECT_TRUE(absl::StrContains(r.out, absl::StrCat(gdr::topo::testing::kDgxNics[i],
                                                      " (same switch)\n")))
        << r.out;
  }
  EXPECT_FALSE(absl::StrContains(r.out, "warning")) << r.out;

  r = Gdrctl({"topo", "--sysfs-root", tree, "--rails", "mlx5_0,mlx5_1,mlx5_2,mlx5_3"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(
      r.out,
      "  0000:5d:00.0   NODE       NODE       NODE       SW         SYS        SYS        SYS  "
      "      SYS        mlx5_3 (same switch)\n"
      "  0000:9a:00.0   SYS        SYS        SYS        SYS        SW         NODE       NODE "
      "      NODE       mlx5_0 (across sockets)\n"))
      << r.out;
  for (const char* gpu : {"0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"}) {
    EXPECT_TRUE(absl::StrContains(
        r.out, absl::StrCat("warning: GPU ", gpu, " has no NIC on its NUMA node (1) among "
                            "mlx5_0,mlx5_1,mlx5_2,mlx5_3; using mlx5_0 across sockets (SYS)")))
        << r.out;
  }

  r = Gdrctl({"topo", "--json", "--sysfs-root", tree, "--rails", "mlx5_0,mlx5_1,mlx5_2,mlx5_3"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "\"rails\":[\"mlx5_0\",\"mlx5_1\",\"mlx5_2\",\"mlx5_3\"]"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(
      r.out, "\"nearest_nic\":\"mlx5_7\",\"rail\":{\"name\":\"mlx5_0\",\"relation\":"
             "\"across sockets\",\"hops\":8},\"rail_warning\":\"GPU 0000:db:00.0 has no NIC on "
             "its NUMA node (1)"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(
      r.out, "\"nearest_nic\":\"mlx5_0\",\"rail\":{\"name\":\"mlx5_0\",\"relation\":"
             "\"same switch\",\"hops\":4}}"))
      << r.out;

  // A rail the tree does not have is a usage error naming it and the devices there.
  r = Gdrctl({"topo", "--sysfs-root", tree, "--rails", "mlx5_0,mlx5_9"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.err, "--rails: no RDMA device 'mlx5_9' in " + tree +
                                           "/class/infiniband (there: mlx5_0, mlx5_1"))
      << r.err;
  r = Gdrctl({"topo", "--sysfs-root", tree, "--rails", "mlx5_1,mlx5_1"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.err, "--rails: 'mlx5_1' named twice")) << r.err;
}

TEST_F(GdrctlGpuTest, TopoOnMissingTree) {
  ProcessResult r = Gdrctl({"topo", "--sysfs-root", dir_->File("nothing")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "is " + dir_->File("nothing") + " a sysfs tree?")) << r.err;
}

TEST_F(GdrctlGpuTest, MalformedGpuIsAUsageError) {
  for (const char* bad : {"b7:00", "gpu0", "0000:b7:00.9", "-1"}) {
    ProcessResult r = Gdrctl({"write", "--gpu", bad, "-s", "4KiB"});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.Describe();
    EXPECT_TRUE(absl::StrContains(r.err, "--gpu: ")) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "BB:DD.F")) << r.err;
  }
}

TEST_F(GdrctlGpuTest, GpuWithoutDriverSaysWhyAndHostMemoryStillWorks) {
  if (gdr::cuda::DriverStatus().ok()) GTEST_SKIP() << "this host has an NVIDIA driver";
  auto d = DaemonProcess::Start({"--volume", "vol0=4MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  for (const char* gpu : {"0000:b7:00.0", "b7:00.0", "0"}) {
    ProcessResult r =
        Gdrctl({"--daemon", (*d)->address(), "write", "--gpu", gpu, "-s", "4KiB", "--verify"});
    EXPECT_EQ(r.exit_code, 1) << r.Describe();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat("GPU '", gpu, "'"))) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, gdr::cuda::BuiltWithCuda() ? "libcuda.so.1"
                                                                    : "no GPU support"))
        << r.err;
  }
  ProcessResult r = Gdrctl({"--daemon", (*d)->address(), "write", "-s", "64KiB", "--verify"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "verified")) << r.out;
}

TEST_F(GdrctlGpuTest, VerifiedWriteAndReadIntoGpu) {
  auto gpus = gdr::cuda::ListGpus();
  if (!gpus.ok()) GTEST_SKIP() << "no GPU: " << gpus.status().message();
  auto d = DaemonProcess::Start({"--volume", "vol0=64MiB", "--max-op-size", "16MiB"});
  ASSERT_TRUE(d.ok()) << d.status();
  const std::string pci = gpus->front().pci;
  ProcessResult r = Gdrctl({"--daemon", (*d)->address(), "write", "--gpu", pci, "-s", "16MiB",
                            "-o", "4096", "--verify"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(absl::StrContains(r.out, "verified in GPU memory")) << r.out;
  r = Gdrctl({"--daemon", (*d)->address(), "read", "--gpu", pci.substr(5), "-s", "16MiB",
              "--salt", "7", "--verify"});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  r = Gdrctl({"--daemon", (*d)->address(), "write", "--gpu", "0000:ff:1f.7", "-s", "4KiB"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "GPUs present: 0 " + gpus->front().pci)) << r.err;
}

}  // namespace
}  // namespace gdr::integ
