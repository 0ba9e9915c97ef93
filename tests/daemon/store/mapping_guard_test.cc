// File volumes whose file shrinks under the mapping (daemon/store/mapping_guard.h and
// Volume::CheckBacked): the volume reports DATA_LOSS naming the file while it is short and OK
// once restored; a guarded copy into or out of a page past the file's end returns the fault
// (the thread carries on) instead of dying of SIGBUS, also from a buffered socket reader as the
// tcp link uses it; an unguarded one still kills the process.
#include "daemon/store/mapping_guard.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/socket.h"
#include "daemon/store/store.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

constexpr uint64_t kSize = 1 << 20;
constexpr uint64_t kPage = 4096;

class MappingGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TMPDIR");
    file_ = absl::StrCat(tmp ? tmp : "/tmp", "/mapping_guard_test_", ::getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name(), ".img");
    ::unlink(file_.c_str());
    VolumeSpec spec;
    spec.name = "fv";
    spec.size = kSize;
    spec.file = file_;
    auto v = Volume::Create(spec);
    ASSERT_TRUE(v.ok()) << v.status();
    volume_ = std::move(*v);
  }
  void TearDown() override {
    volume_.reset();
    ::unlink(file_.c_str());
  }
  std::string file_;
  std::unique_ptr<Volume> volume_;
};

TEST_F(MappingGuardTest, CheckBackedSaysDataLossNamingTheFileWhileItIsShort) {
  EXPECT_TRUE(volume_->CheckBacked().ok());
  ASSERT_EQ(::truncate(file_.c_str(), kPage), 0);
  absl::Status s = volume_->CheckBacked();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("volume 'fv': its file ", file_,
                                                           " is 4096 bytes")))
      << s;
  ASSERT_EQ(::truncate(file_.c_str(), kSize), 0);
  EXPECT_TRUE(volume_->CheckBacked().ok());
  // The file renamed away is still the one mapped: its size is what counts.
  const std::string moved = file_ + ".moved";
  ASSERT_EQ(::rename(file_.c_str(), moved.c_str()), 0);
  EXPECT_TRUE(volume_->CheckBacked().ok());
  ASSERT_EQ(::truncate(moved.c_str(), 0), 0);
  EXPECT_TRUE(absl::IsDataLoss(volume_->CheckBacked()));
  ::unlink(moved.c_str());
  // Memory volumes are always backed.
  VolumeSpec mem;
  mem.name = "mem";
  mem.size = kPage;
  auto m = Volume::Create(mem);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE((*m)->CheckBacked().ok());
}

TEST_F(MappingGuardTest, AGuardedCopyPastTheFilesEndReturnsTheFault) {
  ASSERT_EQ(::truncate(file_.c_str(), kPage), 0);
  std::vector<std::byte> src(2 * kPage, std::byte{7});
  std::byte* const into = volume_->data() + 16 * kPage + 100;
  // Into the mapping (a put) and out of it (a get), each several times on one thread: the
  // thread carries on after every fault.
  for (int i = 0; i < 3; ++i) {
    std::optional<const void*> fault =
        RunGuarded([&] { std::memcpy(into, src.data(), src.size()); });
    ASSERT_TRUE(fault.has_value());
    absl::Status s = MappingFaultStatus(*fault);
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("volume 'fv': its file ", file_,
                                                            " no longer holds offset ")))
        << s;
    fault = RunGuarded([&] { std::memcpy(src.data(), into, src.size()); });
    ASSERT_TRUE(fault.has_value());
  }
  // What the file still holds is served as before.
  std::optional<const void*> ok =
      RunGuarded([&] { std::memcpy(volume_->data(), src.data(), 100); });
  EXPECT_FALSE(ok.has_value());
  EXPECT_EQ(volume_->data()[99], std::byte{7});
  // Other threads are guarded on their own.
  std::vector<std::thread> threads;
  std::atomic<int> faults{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::byte b[64];
      if (RunGuarded([&] { std::memcpy(b, volume_->data() + (8 + t) * kPage, sizeof(b)); })) {
        ++faults;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(faults.load(), 4);
}

TEST_F(MappingGuardTest, NestedRegionsReturnToTheInnermost) {
  ASSERT_EQ(::truncate(file_.c_str(), kPage), 0);
  bool inner_faulted = false;
  std::optional<const void*> outer = RunGuarded([&] {
    inner_faulted = RunGuarded([&] { volume_->data()[8 * kPage] = std::byte{1}; }).has_value();
  });
  EXPECT_TRUE(inner_faulted);
  EXPECT_FALSE(outer.has_value());
}

// The tcp link's receive path: a BufferedReader whose copy out of its buffer lands in the
// mapping (the payload that arrived with the header) faults inside the guard.
TEST_F(MappingGuardTest, ABufferedSocketReadIntoATruncatedMappingIsCaught) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ScopedFd a(sv[0]), b(sv[1]);
  const std::string sent(32 + 8192, 'p');
  ASSERT_TRUE(WriteFull(b.get(), sent.data(), sent.size()).ok());
  ASSERT_EQ(::truncate(file_.c_str(), kPage), 0);
  BufferedReader reader(a.get());
  char header[32];
  ASSERT_TRUE(reader.Read(header, sizeof(header)).ok());
  absl::Status s;
  std::optional<const void*> fault =
      RunGuarded([&] { s = reader.Read(volume_->data() + 4 * kPage, 8192); });
  ASSERT_TRUE(fault.has_value());
  EXPECT_TRUE(absl::StrContains(MappingFaultStatus(*fault).message(), file_));
}

TEST_F(MappingGuardTest, AnUnguardedFaultStillEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ASSERT_EQ(::truncate(file_.c_str(), kPage), 0);
  EXPECT_DEATH(
      {
        volume_->data()[8 * kPage] = std::byte{1};
        std::fprintf(stderr, "survived\n");
        std::exit(0);
      },
      "");
}

}  // namespace
}  // namespace gdr
