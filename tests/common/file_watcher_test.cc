// FileWatcher on real files: a file written in place, one that appears after the watch began,
// and a Kubernetes Secret's update (a new `..data` directory behind the files' symlinks) are
// each reported, naming only the watched paths that changed.
#include "common/process/file_watcher.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <fstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "tests/integration/child_process.h"

namespace gdr {
namespace {

// Every call the watcher made, in order; waits for the next one.
class Calls {
 public:
  FileWatcher::OnChange Sink() {
    return [this](const std::vector<std::string>& changed) {
      absl::MutexLock lock(&mu_);
      calls_.push_back(changed);
    };
  }
  // The call after the first `seen`, or an empty list when none comes within a minute (a
  // bound for a broken watcher, not a timing expectation).
  std::vector<std::string> Next(size_t seen) {
    absl::MutexLock lock(&mu_);
    auto more = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_.size() > seen; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&more), absl::Minutes(1))) return {};
    return calls_[seen];
  }

 private:
  absl::Mutex mu_;
  std::vector<std::vector<std::string>> calls_ ABSL_GUARDED_BY(mu_);
};

class FileWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = integ::TempDir::Create("gdr-filewatch");
    ASSERT_TRUE(d.ok()) << d.status();
    tmp_ = *std::move(d);
    dir_ = tmp_->path();
  }
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::trunc) << text;
  }
  std::unique_ptr<integ::TempDir> tmp_;
  std::string dir_;
};

TEST_F(FileWatcherTest, AWriteInPlaceAndAFileAppearingAreReportedOthersAreNot) {
  const std::string a = dir_ + "/a", b = dir_ + "/b", other = dir_ + "/other";
  Write(a, "one");
  Calls calls;
  auto w = FileWatcher::Start({a, b, ""}, calls.Sink());
  ASSERT_TRUE(w.ok()) << w.status();
  // A file beside them that is not watched changes first: no call names it.
  Write(other, "not watched");
  Write(a, "two, longer");
  EXPECT_EQ(calls.Next(0), std::vector<std::string>{a});
  Write(b, "b appears");
  EXPECT_EQ(calls.Next(1), std::vector<std::string>{b});
}

TEST_F(FileWatcherTest, ASecretsDataSymlinkSwapIsReported) {
  // The kubelet's layout: tokens -> ..data/tokens, ..data -> ..<timestamp>.
  ASSERT_EQ(::mkdir((dir_ + "/..ts1").c_str(), 0755), 0);
  Write(dir_ + "/..ts1/tokens", "first");
  ASSERT_EQ(::symlink("..ts1", (dir_ + "/..data").c_str()), 0);
  ASSERT_EQ(::symlink("..data/tokens", (dir_ + "/tokens").c_str()), 0);
  Calls calls;
  auto w = FileWatcher::Start({dir_ + "/tokens"}, calls.Sink());
  ASSERT_TRUE(w.ok()) << w.status();
  // Same size, new file: the swap alone must be seen, not a size change.
  ASSERT_EQ(::mkdir((dir_ + "/..ts2").c_str(), 0755), 0);
  Write(dir_ + "/..ts2/tokens", "secnd");
  ASSERT_EQ(::symlink("..ts2", (dir_ + "/..data_tmp").c_str()), 0);
  ASSERT_EQ(::rename((dir_ + "/..data_tmp").c_str(), (dir_ + "/..data").c_str()), 0);
  EXPECT_EQ(calls.Next(0), std::vector<std::string>{dir_ + "/tokens"});
}

TEST_F(FileWatcherTest, AMissingDirectoryIsNamed) {
  Calls calls;
  auto w = FileWatcher::Start({dir_ + "/none/tokens"}, calls.Sink());
  ASSERT_FALSE(w.ok());
  EXPECT_NE(std::string(w.status().message()).find(dir_ + "/none"), std::string::npos)
      << w.status();
}

}  // namespace
}  // namespace gdr
