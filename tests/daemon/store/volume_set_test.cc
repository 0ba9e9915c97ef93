// The store as it changes while serving: volumes added and removed, what a holder (an op) keeps
// alive, the hooks that prepare a new volume before anyone can find it, attachments dropped
// before the pages, read-only file volumes; and --volume-dir's parsing, scan and file paths.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "daemon/store/store.h"
#include "daemon/store/volume_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/gdr-volume-set-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~ScratchDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& rel, size_t bytes) const {
    const fs::path p = fs::path(path_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << std::string(bytes, 'x');
    return p.string();
  }

 private:
  std::string path_;
};

// Counts its own end: the volume dropped it.
struct Probe final : Volume::Attachment {
  explicit Probe(std::atomic<int>* gone) : gone(gone) {}
  ~Probe() override { gone->fetch_add(1); }
  std::atomic<int>* gone;
};

TEST(VolumeSetTest, AddedVolumesAreFoundFilledAndRemovedOnesLiveWhileHeld) {
  std::atomic<int> gone{0};  // outlives every volume below
  auto store = Store::Create({{"base", 4096, {}, {}}});
  ASSERT_TRUE(store.ok()) << store.status();
  auto added = (*store)->Add({"run/time", 8192, {}, {}});
  ASSERT_TRUE(added.ok()) << added.status();
  std::shared_ptr<const Volume> found = (*store)->Find("run/time");
  ASSERT_EQ(found, *added);
  EXPECT_FALSE(PatternMismatch(PatternSeed("run/time"), 0,
                               std::span<const std::byte>(found->data(), 8192))
                   .has_value());
  EXPECT_EQ((*store)->Volumes().size(), 2u);
  EXPECT_TRUE(absl::IsAlreadyExists((*store)->Add({"run/time", 4096, {}, {}}).status()));

  found->Attach(&gone, std::make_unique<Probe>(&gone));
  auto removed = (*store)->Remove("run/time");
  ASSERT_TRUE(removed.ok());
  removed->reset();
  added->reset();
  EXPECT_EQ((*store)->Find("run/time"), nullptr);
  EXPECT_EQ(gone.load(), 0) << "an op still holds it";
  // Its bytes are still there for the holder.
  EXPECT_FALSE(PatternMismatch(PatternSeed("run/time"), 0,
                               std::span<const std::byte>(found->data(), 8192))
                   .has_value());
  found.reset();
  EXPECT_EQ(gone.load(), 1);
  EXPECT_TRUE(absl::IsNotFound((*store)->Remove("run/time").status()));
  // The name is free again.
  EXPECT_TRUE((*store)->Add({"run/time", 4096, {}, {}}).ok());
}

TEST(VolumeSetTest, PreparersSeeEveryNewVolumeBeforeItCanBeFoundAndCanRefuseIt) {
  auto store = Store::Create({});
  ASSERT_TRUE(store.ok());
  std::vector<std::string> seen;
  const Store* s = store->get();
  const uint64_t id = s->AddPreparer([&](const Volume& v) -> absl::Status {
    EXPECT_EQ(s->Find(v.name()), nullptr) << "findable before it was prepared";
    seen.push_back(v.name());
    if (v.name() == "refused") return absl::InternalError("no room on rail x");
    return absl::OkStatus();
  });
  EXPECT_TRUE((*store)->Add({"a", 4096, {}, {}}).ok());
  auto refused = (*store)->Add({"refused", 4096, {}, {}});
  EXPECT_THAT(refused.status().message(), HasSubstr("no room on rail x"));
  EXPECT_EQ((*store)->Find("refused"), nullptr);
  s->RemovePreparer(id);
  EXPECT_TRUE((*store)->Add({"b", 4096, {}, {}}).ok());
  EXPECT_THAT(seen, ElementsAre("a", "refused"));
}

TEST(VolumeSetTest, DetachDropsAnOwnersAttachmentOnly) {
  std::atomic<int> a{0}, b{0};  // outlive the volume, whose attachments count into them
  auto store = Store::Create({{"v", 4096, {}, {}}});
  ASSERT_TRUE(store.ok());
  std::shared_ptr<const Volume> v = (*store)->Find("v");
  v->Attach(&a, std::make_unique<Probe>(&a));
  v->Attach(&b, std::make_unique<Probe>(&b));
  EXPECT_NE(v->AttachmentOf(&a), nullptr);
  v->Detach(&a);
  EXPECT_EQ(a.load(), 1);
  EXPECT_EQ(v->AttachmentOf(&a), nullptr);
  EXPECT_NE(v->AttachmentOf(&b), nullptr);
  v->Attach(&b, std::make_unique<Probe>(&b));  // replaces
  EXPECT_EQ(b.load(), 1);
}

TEST(VolumeSetTest, ConcurrentFindsAndChangesAreSafe) {
  auto store = Store::Create({{"steady", 4096, {}, {}}});
  ASSERT_TRUE(store.ok());
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) {
      ASSERT_NE((*store)->Find("steady"), nullptr);
      for (const auto& v : (*store)->Volumes()) ASSERT_GT(v->size(), 0u);
    }
  });
  for (int i = 0; i < 200; ++i) {
    const std::string name = absl::StrCat("churn/", i % 7);
    (void)(*store)->Add({name, 4096, {}, {}});
    (void)(*store)->Remove(name);
  }
  stop.store(true);
  reader.join();
}

TEST(VolumeSetTest, AReadOnlyVolumeMapsAnExistingFileAndIsNeverMadeOrWritten) {
  ScratchDir dir;
  const std::string file = dir.Write("model.bin", 10000);
  ::chmod(file.c_str(), 0444);
  VolumeSpec spec{"model.bin", 10000, file, {}};
  spec.read_only = true;
  auto store = Store::Create({spec});
  ASSERT_TRUE(store.ok()) << store.status();
  std::shared_ptr<const Volume> v = (*store)->Find("model.bin");
  EXPECT_TRUE(v->read_only());
  EXPECT_EQ(static_cast<char>(v->data()[9999]), 'x');  // its bytes, not the pattern
  VolumeSpec missing{"gone", 4096, dir.path() + "/gone", {}};
  missing.read_only = true;
  EXPECT_TRUE(absl::IsNotFound(Volume::Create(missing).status()));
  EXPECT_FALSE(fs::exists(dir.path() + "/gone"));
  VolumeSpec memory{"mem", 4096, "", {}};
  memory.read_only = true;
  EXPECT_TRUE(absl::IsInvalidArgument(Volume::Create(memory).status()));
}

TEST(VolumeDirTest, ParsesItsFlag) {
  auto d = ParseVolumeDir("/srv/ckpt/,writable,media=nvme-gen4");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->path, "/srv/ckpt");
  EXPECT_TRUE(d->writable);
  EXPECT_EQ(d->media.preset, "nvme-gen4");
  d = ParseVolumeDir("/srv/ro");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->writable);
  EXPECT_THAT(ParseVolumeDir("srv/ro").status().message(), HasSubstr("absolute"));
  EXPECT_FALSE(ParseVolumeDir("/srv,colour=blue").ok());
  EXPECT_FALSE(ParseVolumeDir("/srv,file=/x").ok());
}

TEST(VolumeDirTest, ServesEveryFileByItsRelativePathAndSaysWhatItSkipped) {
  ScratchDir dir;
  dir.Write("llama/model-00001-of-00002.safetensors", 300);
  dir.Write("llama/model-00002-of-00002.safetensors", 200);
  dir.Write("config.json", 10);
  dir.Write("empty", 0);
  dir.Write("bad name.bin", 10);
  dir.Write("half.bin.partial", 10);
  fs::create_symlink("/etc/hostname", fs::path(dir.path()) / "escape");
  fs::create_directory_symlink("/etc", fs::path(dir.path()) / "etc-link");
  VolumeDir vd{dir.path(), false, {}};
  std::vector<std::string> skipped;
  auto specs = ScanVolumeDir(vd, 100, &skipped);
  ASSERT_TRUE(specs.ok()) << specs.status();
  std::vector<std::string> names;
  for (const VolumeSpec& s : *specs) {
    names.push_back(s.name);
    EXPECT_TRUE(s.read_only);
    EXPECT_EQ(s.file, dir.path() + "/" + s.name);
  }
  EXPECT_THAT(names, ElementsAre("config.json", "llama/model-00001-of-00002.safetensors",
                                 "llama/model-00002-of-00002.safetensors"));
  EXPECT_EQ((*specs)[1].size, 300u);
  EXPECT_EQ(skipped.size(), 5u) << ::testing::PrintToString(skipped);
  EXPECT_TRUE(absl::IsResourceExhausted(ScanVolumeDir(vd, 2, &skipped).status()));
  EXPECT_TRUE(absl::IsNotFound(ScanVolumeDir({dir.path() + "/none", false, {}}, 9, &skipped)
                                   .status()));
  vd.writable = true;
  specs = ScanVolumeDir(vd, 100, &skipped);
  ASSERT_TRUE(specs.ok());
  EXPECT_FALSE(specs->front().read_only);
}

TEST(VolumeDirTest, AVolumeFileLiesUnderTheDirectoryAndNeverThroughALink) {
  ScratchDir dir;
  VolumeDir vd{dir.path(), true, {}};
  auto path = VolumeFileIn(vd, "ckpt/step-100/rank0.bin", /*make_parents=*/false);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir.path() + "/ckpt/step-100/rank0.bin");
  EXPECT_FALSE(fs::exists(dir.path() + "/ckpt"));
  ASSERT_TRUE(VolumeFileIn(vd, "ckpt/step-100/rank0.bin", true).ok());
  EXPECT_TRUE(fs::is_directory(dir.path() + "/ckpt/step-100"));
  fs::create_directory_symlink("/tmp", fs::path(dir.path()) / "out");
  EXPECT_TRUE(absl::IsFailedPrecondition(VolumeFileIn(vd, "out/x", true).status()));
  fs::create_symlink("/etc/hostname", fs::path(dir.path()) / "host");
  EXPECT_TRUE(absl::IsFailedPrecondition(VolumeFileIn(vd, "host", true).status()));
  dir.Write("file", 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(VolumeFileIn(vd, "file/x", true).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(VolumeFileIn(vd, "../x", true).status()));
}

}  // namespace
}  // namespace gdr
