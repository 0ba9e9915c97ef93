// The store as it changes while serving: volumes added and removed, what a holder (an op) keeps
// alive, the hooks that prepare a new volume before anyone can find it, attachments dropped
// before the pages, read-only file volumes; and --volume-dir's parsing, scan and file paths.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
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

// A volume made at run time in a --volume-dir: made beneath it, its directories with it, never
// through a link planted anywhere on its path, and nothing left when it fails.
absl::StatusOr<std::unique_ptr<Volume>> MakeIn(const VolumeDir& vd, const std::string& name,
                                               uint64_t size) {
  absl::StatusOr<VolumeSpec> spec = VolumeSpecIn(vd, name, size);
  if (!spec.ok()) return spec.status();
  return Volume::Create(*spec);
}

bool IsEmptyDir(const std::string& path) {
  return fs::is_directory(path) && fs::directory_iterator(path) == fs::directory_iterator();
}

TEST(VolumeDirTest, AVolumeFileIsMadeBeneathTheDirectoryAndNeverThroughALink) {
  ScratchDir dir, outside;
  VolumeDir vd{dir.path(), true, {}};
  ASSERT_TRUE(OpenVolumeDir(&vd).ok());
  auto made = MakeIn(vd, "ckpt/step-100/rank0.bin", 8192);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ((*made)->file(), dir.path() + "/ckpt/step-100/rank0.bin");
  EXPECT_EQ(fs::file_size(dir.path() + "/ckpt/step-100/rank0.bin"), 8192u);
  EXPECT_TRUE(IsEmptyDir(outside.path()));

  fs::create_directory_symlink(outside.path(), fs::path(dir.path()) / "out");
  auto through = MakeIn(vd, "out/x", 4096);
  EXPECT_TRUE(absl::IsFailedPrecondition(through.status())) << through.status();
  EXPECT_THAT(std::string(through.status().message()), HasSubstr("symbolic link"));
  // A link deeper down the path, and as the last part.
  fs::create_directory_symlink(outside.path(), fs::path(dir.path()) / "ckpt" / "deep");
  EXPECT_TRUE(absl::IsFailedPrecondition(MakeIn(vd, "ckpt/deep/x", 4096).status()));
  const std::string target = outside.Write("target", 4096);
  fs::create_symlink(target, fs::path(dir.path()) / "host");
  EXPECT_TRUE(absl::IsFailedPrecondition(MakeIn(vd, "host", 4096).status()));
  EXPECT_EQ(fs::file_size(target), 4096u);
  dir.Write("file", 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(MakeIn(vd, "file/x", 4096).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MakeIn(vd, "../x", 4096).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(MakeIn(vd, "a//x", 4096).status()));
  // Nothing was made outside, neither a file nor a fill's leftover.
  std::vector<std::string> there;
  for (const auto& e : fs::directory_iterator(outside.path())) there.push_back(e.path().string());
  EXPECT_THAT(there, ElementsAre(target));
}

TEST(VolumeDirTest, ALinkSwappedInWhileVolumesAreMadeNeverPutsAFileOutside) {
  ScratchDir dir, outside;
  VolumeDir vd{dir.path(), true, {}};
  ASSERT_TRUE(OpenVolumeDir(&vd).ok());
  const fs::path sw = fs::path(dir.path()) / "sw";
  std::atomic<bool> stop{false};
  // Exchanges "sw" (a directory) with "alt" (a link to `outside`) atomically, as fast as it
  // can: "sw" is each of them half the time, and every path check made before its use is raced.
  fs::create_directory(sw);
  fs::create_directory_symlink(outside.path(), fs::path(dir.path()) / "alt");
  std::thread swapper([&] {
    while (!stop.load()) {
      ::renameat2(AT_FDCWD, sw.c_str(), AT_FDCWD, (fs::path(dir.path()) / "alt").c_str(),
                  RENAME_EXCHANGE);
    }
  });
  int made = 0;
  for (int i = 0; i < 300; ++i) {
    auto v = MakeIn(vd, absl::StrCat("sw/v", i), 4096);
    if (v.ok()) ++made;
  }
  stop = true;
  swapper.join();
  std::cerr << "made " << made << " of 300 while the path was swapped\n";
  EXPECT_TRUE(IsEmptyDir(outside.path()))
      << "made " << made << " of 300; outside holds " << fs::directory_iterator(outside.path())
      ->path();
}

TEST(VolumeDirTest, ALongLastSegmentIsMadeAndAFailedCreateLeavesNoDirectoryBehind) {
  ScratchDir dir;
  VolumeDir vd{dir.path(), true, {}};
  ASSERT_TRUE(OpenVolumeDir(&vd).ok());
  // 255 characters in all, 253 of them in the file's own name: a suffix on it would pass
  // NAME_MAX.
  const std::string name = "d/" + std::string(253, 'n');
  auto made = MakeIn(vd, name, 4096);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(fs::file_size(dir.path() + "/" + name), 4096u);
  std::vector<std::string> in_d;
  for (const auto& e : fs::directory_iterator(dir.path() + "/d")) {
    in_d.push_back(e.path().filename().string());
  }
  EXPECT_THAT(in_d, ElementsAre(std::string(253, 'n')));
  // A create that fails after its directories were made (no file system takes 2^62 bytes
  // mapped) leaves none of them.
  auto huge = MakeIn(vd, "new/parents/v.bin", uint64_t{1} << 62);
  EXPECT_FALSE(huge.ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/new")) << huge.status();
}

TEST(VolumeDirTest, RemoveFileUnlinksOnlyTheVolumesOwnFileAndNeverThroughALink) {
  ScratchDir dir, outside;
  VolumeDir vd{dir.path(), true, {}};
  ASSERT_TRUE(OpenVolumeDir(&vd).ok());
  auto a = MakeIn(vd, "dl/a.bin", 4096);
  ASSERT_TRUE(a.ok()) << a.status();
  // dl/ swapped for a link to a directory holding a file of the same name.
  const std::string victim = outside.Write("a.bin", 100);
  fs::rename(dir.path() + "/dl", dir.path() + "/dl.moved");
  fs::create_directory_symlink(outside.path(), dir.path() + "/dl");
  absl::Status s = (*a)->RemoveFile();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_TRUE(fs::exists(victim));
  // Its name now holds another file: left as it is.
  fs::remove(dir.path() + "/dl");
  fs::rename(dir.path() + "/dl.moved", dir.path() + "/dl");
  fs::remove(dir.path() + "/dl/a.bin");
  dir.Write("dl/a.bin", 50);
  s = (*a)->RemoveFile();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("no longer the volume's file"));
  EXPECT_EQ(fs::file_size(dir.path() + "/dl/a.bin"), 50u);
  // Its own file goes; gone already is fine.
  auto b = MakeIn(vd, "dl/b.bin", 4096);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE((*b)->RemoveFile().ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/dl/b.bin"));
  EXPECT_TRUE((*b)->RemoveFile().ok());
  // A --volume file=PATH is not the daemon's to delete.
  VolumeSpec own{"own", 4096, dir.path() + "/own.bin", {}};
  auto o = Volume::Create(own);
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition((*o)->RemoveFile()));
  EXPECT_TRUE(fs::exists(dir.path() + "/own.bin"));
}

TEST(VolumeDirTest, AFifoIsSkippedAndRefusedWithoutHanging) {
  ScratchDir dir;
  dir.Write("ok.bin", 10);
  ASSERT_EQ(::mkfifo((dir.path() + "/pipe").c_str(), 0644), 0);
  VolumeDir vd{dir.path(), false, {}};
  std::vector<std::string> skipped;
  auto specs = ScanVolumeDir(vd, 100, &skipped);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_THAT(skipped, ElementsAre(HasSubstr("pipe: not a regular file")));
  // Named as a volume anyway (a read-only spec of it): refused, not opened.
  VolumeSpec pipe = specs->front();
  pipe.name = "pipe";
  auto v = Volume::Create(pipe);
  EXPECT_TRUE(absl::IsFailedPrecondition(v.status())) << v.status();
}

// A daemon run as an unprivileged user, with a directory it cannot read in the served one (as
// lost+found is): that directory's files are missing, named in `skipped`; every other file is
// served. Root reads everything, so the scan runs in a child that gave up root.
TEST(VolumeDirTest, AnUnreadableDirectoryHidesOnlyItsOwnFiles) {
  ScratchDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  for (int i = 0; i < 16; ++i) dir.Write(absl::StrCat("f", i, ".bin"), 10);
  for (int i = 0; i < 4; ++i) dir.Write(absl::StrCat("z/g", i, ".bin"), 10);
  dir.Write("lost+found/hidden.bin", 10);
  ASSERT_EQ(::chmod((dir.path() + "/lost+found").c_str(), 0700), 0);
  if (::geteuid() == 0) {
    // Owned by another uid than the scanner's.
    ASSERT_EQ(::chown((dir.path() + "/lost+found").c_str(), 0, 0), 0);
  }
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(out[0]);
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    std::vector<std::string> skipped;
    auto specs = ScanVolumeDir({dir.path(), false, {}}, 100, &skipped);
    if (!specs.ok()) ::_exit(4);
    std::string text = absl::StrCat(specs->size(), "\n");
    for (const std::string& why : skipped) absl::StrAppend(&text, why, "\n");
    if (::write(out[1], text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      ::_exit(5);
    }
    ::_exit(0);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) text.append(buf, n);
  ::close(out[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_THAT(text, ::testing::StartsWith("20\n"));
  EXPECT_THAT(text, HasSubstr("lost+found/: cannot be read (Permission denied)"));
}

}  // namespace
}  // namespace gdr
