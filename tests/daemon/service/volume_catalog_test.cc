// The volume catalog (daemon/service/volume_catalog.h) over a real store: the configuration's
// volumes at start-up are made by the path CreateVolume and SIGHUP take (the transports' hook,
// counters, media model, the cluster-entry hook) and deleted by it like any other.
#include "daemon/service/volume_catalog.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Shown(const DaemonStats& stats) {
  std::vector<std::string> names;
  for (const auto& [name, counters] : stats.volumes()) names.push_back(name);
  return names;
}

class VolumeCatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> s = Store::Create({});
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
    // Stands for a transport: it sees each volume before anyone can find it.
    preparer_ = store_->AddPreparer([this](const Volume& v) {
      absl::MutexLock lock(&mu_);
      prepared_.push_back(v.name());
      return absl::OkStatus();
    });
    // No memory to spare as far as the room check can tell. One file per test process: ctest
    // runs this fixture's tests at once, and a shared file is truncated under another's read.
    meminfo_ = absl::StrCat(::testing::TempDir(), "/volume_catalog_test_meminfo.", ::getpid());
    std::ofstream(meminfo_) << "MemTotal: 1024 kB\nMemAvailable: 0 kB\n";
    VolumeCatalogOptions o;
    o.meminfo = meminfo_;
    // The cluster entry's hook: what the store holds when it runs.
    o.volumes_changed = [this] {
      absl::MutexLock lock(&mu_);
      std::vector<std::string> now;
      for (const std::shared_ptr<const Volume>& v : store_->Volumes()) now.push_back(v->name());
      entries_.push_back(now);
    };
    catalog_ = std::make_unique<VolumeCatalog>(store_.get(), &media_, &stats_, o);
  }
  void TearDown() override {
    catalog_.reset();
    store_->RemovePreparer(preparer_);
    std::remove(meminfo_.c_str());
  }

  static VolumeSpec Spec(const std::string& text) {
    absl::StatusOr<VolumeSpec> spec = ParseVolumeSpec(text);
    EXPECT_TRUE(spec.ok()) << spec.status();
    return spec.ok() ? *spec : VolumeSpec{};
  }

  std::unique_ptr<Store> store_;
  DaemonStats stats_{std::vector<std::string>{}};
  MediaTiming media_{std::map<std::string, MediaSettings>{}};
  std::string meminfo_;
  uint64_t preparer_ = 0;
  absl::Mutex mu_;
  std::vector<std::string> prepared_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<std::string>> entries_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<VolumeCatalog> catalog_;
};

TEST_F(VolumeCatalogTest, StartTimeVolumesAreMadeByTheCreateVolumePath) {
  ASSERT_TRUE(catalog_->CreateAtStart({Spec("a=1MiB,media=hdd"), Spec("b=64KiB")}).ok());
  EXPECT_THAT(Shown(stats_), ElementsAre("a", "b"));
  std::shared_ptr<MediaModel> a = media_.Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->settings().preset, "hdd");
  EXPECT_NE(media_.Find("b"), nullptr);
  absl::MutexLock lock(&mu_);
  EXPECT_THAT(prepared_, ElementsAre("a", "b"));
  // The entry hook ran once per volume, each time seeing it in the store.
  EXPECT_THAT(entries_, ElementsAre(ElementsAre("a"), ElementsAre("a", "b")));
}

TEST_F(VolumeCatalogTest, AStartTimeVolumeIsDeletedLikeAnyOther) {
  ASSERT_TRUE(catalog_->CreateAtStart({Spec("a=64KiB,media=hdd"), Spec("b=64KiB")}).ok());
  ASSERT_TRUE(catalog_->DeleteConfigured("a", "test").ok());
  EXPECT_EQ(store_->Find("a"), nullptr);
  EXPECT_EQ(media_.Find("a"), nullptr);
  EXPECT_THAT(Shown(stats_), ElementsAre("b"));
  absl::MutexLock lock(&mu_);
  ASSERT_EQ(entries_.size(), 3u);
  EXPECT_THAT(entries_.back(), ElementsAre("b"));
}

TEST_F(VolumeCatalogTest, OnlyVolumesMadeWhileServingAreHeldToTheRoomLeft) {
  // MemAvailable 0: the start is not refused for it, a later volume is.
  ASSERT_TRUE(catalog_->CreateAtStart({Spec("a=64KiB")}).ok());
  absl::StatusOr<VolumeCatalog::Made> later = catalog_->CreateConfigured(Spec("b=64KiB"), "test");
  EXPECT_TRUE(absl::IsResourceExhausted(later.status())) << later.status();
  EXPECT_EQ(store_->Find("b"), nullptr);
  EXPECT_THAT(Shown(stats_), ElementsAre("a"));
}

TEST_F(VolumeCatalogTest, TheFirstFailureStopsTheStartNamingTheVolume) {
  absl::Status s = catalog_->CreateAtStart({Spec("a=64KiB"), Spec("a=128KiB"), Spec("c=64KiB")});
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("'a'"));
  EXPECT_EQ(store_->Find("c"), nullptr);
  EXPECT_THAT(Shown(stats_), ElementsAre("a"));
}

}  // namespace
}  // namespace gdr
