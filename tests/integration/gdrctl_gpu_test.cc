// gdrctl's GPU surface as a user meets it: `topo` against the fake sysfs tree (two NICs, four
// GPUs, two switches), --gpu names that are malformed (usage error, exit 2), and --gpu on a host
// without a GPU driver (exit 1, one line naming what is missing) while host memory keeps
// working in the same binary. On a GPU host the no-driver case is skipped and a verified write
// into GPU memory runs instead.
#include <gtest/gtest.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cuda/gpu.h"
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
      "GPUs:\n"
      "  0x2330     0000:04:00.0  numa 0  "
      "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0\n"
      "  0x2330     0000:05:00.0  numa 0  "
      "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:02.0/0000:05:00.0\n"
      "  0x2330     0000:84:00.0  numa 1  "
      "pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:01.0/0000:84:00.0\n"
      "  0x2330     0000:c1:00.0  numa 1  pci0000:c0/0000:c0:01.0/0000:c1:00.0\n"
      "GPU to NIC (SW same switch, RP same root port, HB same host bridge, NODE same NUMA "
      "node, SYS across sockets):\n"
      "                 mlx5_0     mlx5_1     nearest\n"
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
