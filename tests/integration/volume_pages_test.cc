// GetInfo and GetStats of a daemon whose volume list is past gRPC's 4 MiB message limit:
// 10,000 --volume-dir files with 240-character names (about 5 MB of VolumeInfo). The daemon
// answers a page at a time (a caller that asks for nothing in particular, as one that predates
// paging, gets one bounded page), and every client reads each page: the C++ client's GetInfo and
// GetStats, one volume's info, transport auto, gdrctl info / volume list / stats. A request for
// what no page holds is refused naming the field.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/src/daemon_rpc.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

namespace v1 = gdrstore::v1;

constexpr int kVolumes = 10000;
constexpr size_t kGrpcDefaultMaxMessage = 4 << 20;

// tmpfs where the host has one: 10,000 files are made there in well under a second, and take
// seconds on a busy disk.
std::string FastScratch() {
  struct stat st;
  return ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "";
}

// 240 characters, in name order by index.
std::string NameOf(int i) { return absl::StrFormat("%05d-%s", i, std::string(234, 'n')); }

class VolumePagesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto dir = TempDir::Create("volume-pages", FastScratch());
    ASSERT_TRUE(dir.ok()) << dir.status();
    files_ = dir->release();
    for (int i = 0; i < kVolumes; ++i) {
      std::FILE* f = std::fopen(files_->File(NameOf(i)).c_str(), "wb");
      ASSERT_NE(f, nullptr) << NameOf(i);
      ASSERT_EQ(std::fputc('x', f), 'x');
      ASSERT_EQ(std::fclose(f), 0);
    }
    auto d = DaemonProcess::Start({"--volume-dir", files_->path(), "--max-volumes", "20000",
                                   "--volume", "mem0=1MiB"});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = d->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
    delete files_;
    files_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(daemon_, nullptr); }

  std::unique_ptr<v1::GdrStore::Stub> Stub() {
    return v1::GdrStore::NewStub(
        grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
  }

  // Every name the daemon serves, in name order.
  static std::vector<std::string> Expected() {
    std::vector<std::string> names;
    for (int i = 0; i < kVolumes; ++i) names.push_back(NameOf(i));
    names.push_back("mem0");  // digits sort before letters
    return names;
  }

  ProcessResult Gdrctl(std::vector<std::string> args) {
    auto scratch = TempDir::Create("volume-pages-gdrctl");
    EXPECT_TRUE(scratch.ok()) << scratch.status();
    if (!scratch.ok()) return {};
    std::vector<std::string> argv = {GDR_GDRCTL_BIN, "--daemon", daemon_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = RunProcess(argv, (*scratch)->path(), "gdrctl", absl::Seconds(60));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ProcessResult{};
  }

  static TempDir* files_;
  static DaemonProcess* daemon_;
};
TempDir* VolumePagesTest::files_ = nullptr;
DaemonProcess* VolumePagesTest::daemon_ = nullptr;

TEST_F(VolumePagesTest, AnEmptyRequestGetsOneBoundedPageWithACursor) {
  auto stub = Stub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GetInfoResponse page;
  grpc::Status s = stub->GetInfo(&ctx, v1::GetInfoRequest(), &page);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_LT(page.ByteSizeLong(), kGrpcDefaultMaxMessage / 2);
  ASSERT_GT(page.volumes_size(), 0);
  ASSERT_LT(page.volumes_size(), kVolumes);
  EXPECT_EQ(page.volumes(0).name(), NameOf(0));
  EXPECT_EQ(page.next_volumes_after(), page.volumes(page.volumes_size() - 1).name());
  // The rest of the answer is whole on every page.
  EXPECT_TRUE(page.has_limits());
  EXPECT_GT(page.transports_size(), 0);
}

TEST_F(VolumePagesTest, ClientGetInfoListsEveryVolumeInNameOrder) {
  auto c = ConnectClient(*daemon_);
  ASSERT_NE(c, nullptr);
  auto info = c->GetInfo(std::chrono::seconds(60));
  ASSERT_TRUE(info.ok()) << info.status();
  std::vector<std::string> names;
  for (const v1::VolumeInfo& v : info->volumes()) names.push_back(v.name());
  EXPECT_EQ(names, Expected());
  EXPECT_EQ(info->next_volumes_after(), "");
  EXPECT_EQ(info->volumes(7).backing(), absl::StrCat("file:", files_->File(NameOf(7))));
  EXPECT_TRUE(info->volumes(7).read_only());
}

TEST_F(VolumePagesTest, PagesOfAnySizeJoinToTheSameList) {
  auto stub = Stub();
  v1::GetInfoRequest request;
  request.set_max_volumes(7);
  request.set_volumes_after(NameOf(kVolumes - 20));
  auto tail = gdrstore::GetInfoPages(*stub, request,
                                     std::chrono::system_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(tail.ok()) << tail.status();
  std::vector<std::string> names;
  for (const v1::VolumeInfo& v : tail->volumes()) names.push_back(v.name());
  const std::vector<std::string> all = Expected();
  const std::vector<std::string> expected(all.end() - 20, all.end());
  EXPECT_EQ(names, expected);
}

TEST_F(VolumePagesTest, OneVolumesInfoIsOneSmallAnswer) {
  auto c = ConnectClient(*daemon_);
  ASSERT_NE(c, nullptr);
  auto one = c->GetVolumeInfo(NameOf(4321));
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->volumes_size(), 1);
  EXPECT_EQ(one->volumes(0).name(), NameOf(4321));
  EXPECT_EQ(one->volumes(0).size(), 1u);
  EXPECT_TRUE(one->has_limits());
  auto none = c->GetVolumeInfo("no-such-volume");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->volumes_size(), 0);
}

TEST_F(VolumePagesTest, RequestsNoPageHoldsAreRefusedNamingTheField) {
  auto stub = Stub();
  auto refused = [&](const v1::GetInfoRequest& r) {
    grpc::ClientContext ctx;
    v1::GetInfoResponse out;
    return stub->GetInfo(&ctx, r, &out);
  };
  v1::GetInfoRequest long_cursor;
  long_cursor.set_volumes_after(std::string(300, 'a'));
  grpc::Status s = refused(long_cursor);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "volumes_after")) << s.error_message();
  v1::GetInfoRequest bad_name;
  bad_name.set_volume("../etc/passwd");
  s = refused(bad_name);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "volume")) << s.error_message();
  v1::GetInfoRequest both;
  both.set_volume("mem0");
  both.set_volumes_after("a");
  s = refused(both);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "volumes_after")) << s.error_message();

  grpc::ClientContext ctx;
  v1::GetStatsRequest stats;
  stats.set_page_after(std::string(300, 'a'));
  v1::GetStatsResponse out;
  s = stub->GetStats(&ctx, stats, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "page_after")) << s.error_message();
}

TEST_F(VolumePagesTest, ClientGetStatsListsEveryVolume) {
  auto stub = Stub();
  {
    grpc::ClientContext ctx;
    v1::GetStatsResponse first;
    ASSERT_TRUE(stub->GetStats(&ctx, v1::GetStatsRequest(), &first).ok());
    EXPECT_LT(first.volumes_size(), kVolumes);
    EXPECT_FALSE(first.next_page_after().empty());
  }
  auto c = ConnectClient(*daemon_);
  ASSERT_NE(c, nullptr);
  auto stats = c->GetStats(std::chrono::seconds(60));
  ASSERT_TRUE(stats.ok()) << stats.status();
  std::vector<std::string> names;
  for (const v1::VolumeStats& v : stats->volumes()) names.push_back(v.name());
  EXPECT_EQ(names, Expected());
  EXPECT_EQ(stats->next_page_after(), "");
}

TEST_F(VolumePagesTest, TransportAutoConnectsAndMovesBytes) {
  gdrstore::ClientOptions o;
  o.daemon_address = daemon_->address();
  o.transport = gdrstore::Transport::kAuto;
  auto c = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto buf = (*c)->AllocateBuffer(1);
  ASSERT_TRUE(buf.ok()) << buf.status();
  auto got = (*c)->Write({NameOf(9999), 0, 1}, **buf);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(static_cast<char>((*buf)->data()[0]), 'x');
}

TEST_F(VolumePagesTest, GdrctlInfoVolumeListAndStatsShowEveryVolume) {
  ProcessResult info = Gdrctl({"--json", "info"});
  ASSERT_EQ(info.exit_code, 0) << info.Describe();
  for (int i : {0, 4999, kVolumes - 1}) {
    EXPECT_TRUE(absl::StrContains(info.out, absl::StrCat("\"", NameOf(i), "\""))) << i;
  }
  ProcessResult list = Gdrctl({"volume", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.Describe();
  EXPECT_TRUE(absl::StartsWith(list.out, absl::StrCat(kVolumes + 1, " volume(s)\n")))
      << list.out.substr(0, 200);
  std::set<std::string> listed;
  for (absl::string_view line : absl::StrSplit(list.out, '\n')) {
    listed.insert(std::string(line.substr(0, line.find(' '))));
  }
  for (const std::string& name : Expected()) EXPECT_EQ(listed.count(name), 1u) << name;
  ProcessResult stats = Gdrctl({"--json", "stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.Describe();
  EXPECT_TRUE(absl::StrContains(stats.out, NameOf(kVolumes - 1)));
}

}  // namespace
}  // namespace gdr::integ
