// gdrctl against a cluster: `cluster status`, `cluster create-volume`, write/read/bench with
// --cluster (real etcd, two real daemons) and with --cluster-file (no etcd), and its usage
// errors.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/common/etcd_server.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

class GdrctlClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = TempDir::Create("gdrctl-cluster");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::move(*dir);
  }

  absl::StatusOr<ProcessResult> Gdrctl(std::vector<std::string> args) {
    args.insert(args.begin(), GDR_GDRCTL_BIN);
    return RunProcess(args, dir_->path(), "gdrctl", absl::Seconds(120));
  }

  std::unique_ptr<TempDir> dir_;
};

TEST_F(GdrctlClusterTest, StatusCreateVolumeAndVerifiedOpsThroughEtcd) {
  if (absl::Status st = EtcdServer::Available(); !st.ok()) GTEST_SKIP() << st.message();
  auto etcd = EtcdServer::Create();
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  const std::string url = (*etcd)->url("gdrctl");
  std::unique_ptr<DaemonProcess> d[2];
  for (int i = 0; i < 2; ++i) {
    auto started = DaemonProcess::Start({"--cluster", url, "--cluster-id", absl::StrCat("s", i),
                                         "--volume", "vol0=32MiB"});
    ASSERT_TRUE(started.ok()) << started.status();
    d[i] = std::move(*started);
  }
  // Registration runs on its own thread: wait until both are listed and healthy.
  absl::StatusOr<ProcessResult> status;
  ASSERT_TRUE(PollUntil(
      [&] {
        status = Gdrctl({"--cluster", url, "cluster", "status"});
        return status.ok() && status->exit_code == 0 &&
               absl::StrContains(status->out, "2 present and healthy");
      },
      absl::Seconds(15), absl::Milliseconds(200)))
      << (status.ok() ? status->Describe() + status->out : status.status().ToString());
  EXPECT_TRUE(absl::StrContains(status->out, "s0")) << status->out;
  EXPECT_TRUE(absl::StrContains(status->out, d[1]->address())) << status->out;

  auto created = Gdrctl({"--cluster", url, "cluster", "create-volume", "vol0", "--stripe-unit",
                         "1MiB", "--replicas", "2"});
  ASSERT_TRUE(created.ok());
  ASSERT_EQ(created->exit_code, 0) << created->Describe();
  EXPECT_TRUE(absl::StrContains(created->out, "replicas 2")) << created->out;
  auto twice = Gdrctl({"--cluster", url, "cluster", "create-volume", "vol0"});
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->exit_code, 1);
  EXPECT_TRUE(absl::StrContains(twice->err, "exists already")) << twice->err;

  // Volumes made on the members at run time, then taken away with them.
  auto made = Gdrctl({"--cluster", url, "cluster", "create-volume", "scratch", "--stripe-unit",
                      "1MiB", "--size", "3MiB"});
  ASSERT_TRUE(made.ok());
  ASSERT_EQ(made->exit_code, 0) << made->Describe();
  EXPECT_TRUE(absl::StrContains(made->out, "created cluster volume scratch: 4 MiB"))
      << made->out;
  auto media_alone = Gdrctl({"--cluster", url, "cluster", "create-volume", "x", "--media",
                             "media=hdd"});
  ASSERT_TRUE(media_alone.ok());
  EXPECT_EQ(media_alone->exit_code, 2);
  EXPECT_TRUE(absl::StrContains(media_alone->err, "need --size")) << media_alone->err;
  auto removed = Gdrctl({"--cluster", url, "cluster", "delete-volume", "scratch",
                         "--member-volumes"});
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->exit_code, 0) << removed->Describe();
  auto gone = Gdrctl({"--daemon", d[0]->address(), "volume", "list"});
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(absl::StrContains(gone->out, "scratch")) << gone->out;
  auto again = Gdrctl({"--cluster", url, "cluster", "delete-volume", "scratch"});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->exit_code, 1);

  // read = put (buffer -> store), write = get (store -> buffer) verified against the put.
  auto put = Gdrctl({"--cluster", url, "read", "-o", "4097", "-s", "3MiB", "--salt", "5"});
  ASSERT_TRUE(put.ok());
  ASSERT_EQ(put->exit_code, 0) << put->Describe();
  auto get = Gdrctl({"--cluster", url, "write", "-o", "4097", "-s", "3MiB", "--salt", "5",
                     "--verify"});
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->exit_code, 0) << get->Describe();
  EXPECT_TRUE(absl::StrContains(get->out, "verified")) << get->out;
  auto wrong_salt = Gdrctl({"--cluster", url, "write", "-o", "4097", "-s", "3MiB", "--salt", "6",
                            "--verify"});
  ASSERT_TRUE(wrong_salt.ok());
  EXPECT_EQ(wrong_salt->exit_code, 3) << wrong_salt->Describe();

  auto bench = Gdrctl({"--cluster", url, "bench", "-s", "1MiB", "-n", "16", "--qd", "2"});
  ASSERT_TRUE(bench.ok());
  EXPECT_EQ(bench->exit_code, 0) << bench->Describe();
  EXPECT_TRUE(absl::StrContains(bench->out, "member s0")) << bench->out;
  EXPECT_TRUE(absl::StrContains(bench->out, "member s1")) << bench->out;
  // A put bench (-t read) in JSON, past the extent verified below: with 2 replicas over the 2
  // members, each member's share is every byte the loop put.
  auto put_bench = Gdrctl({"--cluster", url, "--json", "bench", "-t", "read", "-s", "1MiB", "-n",
                           "16", "--qd", "2", "-o", "8MiB", "--span", "4MiB"});
  ASSERT_TRUE(put_bench.ok());
  EXPECT_EQ(put_bench->exit_code, 0) << put_bench->Describe();
  EXPECT_TRUE(absl::StrContains(put_bench->out, R"("op":"put")")) << put_bench->out;
  for (const char* id : {"s0", "s1"}) {
    EXPECT_TRUE(absl::StrContains(put_bench->out,
                                  absl::StrCat(R"({"id":")", id, R"(","bytes":16777216})")))
        << put_bench->out;
  }
  // The cluster's volumes are what bench looks the volume up in.
  auto no_volume = Gdrctl({"--cluster", url, "bench", "--volume", "nosuch", "-n", "4"});
  ASSERT_TRUE(no_volume.ok());
  EXPECT_EQ(no_volume->exit_code, 1) << no_volume->Describe();
  EXPECT_TRUE(absl::StrContains(no_volume->err, "no volume 'nosuch' on the cluster"))
      << no_volume->err;

  // One member killed: status says so and exits 1; R=2 gets still verify.
  ASSERT_TRUE(d[1]->Signal(SIGKILL).ok());
  (void)d[1]->Wait(absl::Seconds(10));
  auto degraded = Gdrctl({"--cluster", url, "cluster", "status"});
  ASSERT_TRUE(degraded.ok());
  EXPECT_EQ(degraded->exit_code, 1) << degraded->out;
  EXPECT_TRUE(absl::StrContains(degraded->out, "down")) << degraded->out;
  auto survived = Gdrctl({"--cluster", url, "write", "-o", "4097", "-s", "3MiB", "--salt", "5",
                          "--verify"});
  ASSERT_TRUE(survived.ok());
  EXPECT_EQ(survived->exit_code, 0) << survived->Describe();
}

TEST_F(GdrctlClusterTest, AMembersFileNeedsNoEtcd) {
  std::unique_ptr<DaemonProcess> d[2];
  for (int i = 0; i < 2; ++i) {
    auto started = DaemonProcess::Start({"--volume", "vol0=16MiB"});
    ASSERT_TRUE(started.ok()) << started.status();
    d[i] = std::move(*started);
  }
  const std::string file = dir_->File("members.json");
  {
    std::ofstream out(file);
    out << R"({"members": [{"id": "a", "address": ")" << d[0]->address() << R"("},
                            {"id": "b", "address": ")" << d[1]->address() << R"("}],
               "volumes": [{"name": "vol0", "stripe_unit": 65536, "members": ["a", "b"],
                            "replicas": 1, "size": 33554432}]})";
  }
  auto put = Gdrctl({"--cluster-file", file, "read", "-o", "65535", "-s", "1MiB", "--salt", "9"});
  ASSERT_TRUE(put.ok());
  ASSERT_EQ(put->exit_code, 0) << put->Describe();
  auto get = Gdrctl({"--cluster-file", file, "write", "-o", "65535", "-s", "1MiB", "--salt", "9",
                     "--verify"});
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(get->exit_code, 0) << get->Describe();
  // write and read run on a Store, whichever it is: an unaligned buffer offset works here too.
  auto offset_get = Gdrctl({"--cluster-file", file, "write", "-o", "65535", "-s", "1MiB",
                            "--salt", "9", "--buffer-offset", "3", "--verify"});
  ASSERT_TRUE(offset_get.ok());
  EXPECT_EQ(offset_get->exit_code, 0) << offset_get->Describe();
  EXPECT_TRUE(absl::StrContains(offset_get->out, "verified")) << offset_get->out;
  auto status = Gdrctl({"--cluster-file", file, "cluster", "status"});
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->exit_code, 0) << status->Describe();
  EXPECT_TRUE(absl::StrContains(status->out, "stripe unit 64 KiB")) << status->out;
  auto create = Gdrctl({"--cluster-file", file, "cluster", "create-volume", "vol1"});
  ASSERT_TRUE(create.ok());
  EXPECT_EQ(create->exit_code, 1);
  EXPECT_TRUE(absl::StrContains(create->err, "static members file")) << create->err;
}

TEST_F(GdrctlClusterTest, UsageErrorsNameWhatIsWrong) {
  auto no_cluster = Gdrctl({"cluster", "status"});
  ASSERT_TRUE(no_cluster.ok());
  EXPECT_EQ(no_cluster->exit_code, 2);
  EXPECT_TRUE(absl::StrContains(no_cluster->err, "--cluster")) << no_cluster->err;
  auto bad_url = Gdrctl({"--cluster", "etcd://127.0.0.1/p", "cluster", "status"});
  ASSERT_TRUE(bad_url.ok());
  EXPECT_EQ(bad_url->exit_code, 2) << bad_url->Describe();
  EXPECT_TRUE(absl::StrContains(bad_url->err, "endpoint '127.0.0.1'")) << bad_url->err;
  const std::string broken = dir_->File("broken.json");
  {
    std::ofstream out(broken);
    out << R"({"members": [{"id": "a", "address": "127.0.0.1:1"}],
               "volumes": [{"name": "v", "stripe_unit": 1000, "members": ["a"], "replicas": 1,
                            "size": 1000}]})";
  }
  auto bad_file = Gdrctl({"--cluster-file", broken, "cluster", "status"});
  ASSERT_TRUE(bad_file.ok());
  EXPECT_EQ(bad_file->exit_code, 2) << bad_file->Describe();
  EXPECT_TRUE(absl::StrContains(bad_file->err, "stripe_unit")) << bad_file->err;
}

}  // namespace
}  // namespace gdr::integ
