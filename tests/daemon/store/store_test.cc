// Unit tests of the memory store (daemon/store.h): volume specs, the initial pattern fill,
// lookups and the errors of Store::Create.
#include "daemon/store/store.h"

#include <stdlib.h>

#include <filesystem>

#include <span>

#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;

TEST(VolumeSpecTest, ParsesGoodSpecs) {
  struct Case {
    const char* text;
    const char* name;
    uint64_t size;
  } cases[] = {
      {"vol0=1GiB", "vol0", 1ull << 30},
      {"a=1", "a", 1},
      {"A.b-c_D9=4k", "A.b-c_D9", 4096},
      {"x=64 MiB", "x", 64ull << 20},
  };
  for (const Case& c : cases) {
    absl::StatusOr<VolumeSpec> spec = ParseVolumeSpec(c.text);
    ASSERT_TRUE(spec.ok()) << c.text << ": " << spec.status();
    EXPECT_EQ(spec->name, c.name);
    EXPECT_EQ(spec->size, c.size);
  }
  const std::string longest(64, 'n');
  absl::StatusOr<VolumeSpec> spec = ParseVolumeSpec(longest + "=4k");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, longest);
}

TEST(VolumeSpecTest, RejectsBadNames) {
  for (const std::string& text :
       {std::string("=4k"), std::string(256, 'n') + "=4k", std::string("bad name=4k"),
        std::string("vol//0=4k"), std::string("../etc=4k"), std::string("/abs=4k"),
        std::string("a/./b=4k"), std::string("dir/=4k"), std::string("vol:0=4k"),
        std::string("v\xc3\xa9=4k"), std::string("v\0l=4k", 6)}) {
    absl::StatusOr<VolumeSpec> spec = ParseVolumeSpec(text);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  absl::StatusOr<VolumeSpec> spec = ParseVolumeSpec("vol/../0=4k");
  EXPECT_THAT(spec.status().message(), HasSubstr("A-Za-z0-9_.-"));
}

TEST(VolumeSpecTest, RejectsBadSizes) {
  for (const char* text : {"vol0", "vol0=", "vol0=0", "vol0=0GiB", "vol0=abc", "vol0=-4k",
                           "vol0=4x", "vol0=1=2", "vol0=99999999999999999999"}) {
    absl::StatusOr<VolumeSpec> spec = ParseVolumeSpec(text);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(VolumeSpecTest, IsValidVolumeName) {
  EXPECT_TRUE(IsValidVolumeName("vol0"));
  EXPECT_TRUE(IsValidVolumeName("..."));
  EXPECT_TRUE(IsValidVolumeName(std::string(255, 'z')));
  // Relative paths, as --volume-dir names its files; never one that climbs or is absolute.
  EXPECT_TRUE(IsValidVolumeName("llama/model-00001-of-00004.safetensors"));
  EXPECT_TRUE(IsValidVolumeName("a/b/c"));
  EXPECT_FALSE(IsValidVolumeName("a/../b"));
  EXPECT_FALSE(IsValidVolumeName("./a"));
  EXPECT_FALSE(IsValidVolumeName("/a"));
  EXPECT_FALSE(IsValidVolumeName("a/"));
  EXPECT_FALSE(IsValidVolumeName("a//b"));
  EXPECT_FALSE(IsValidVolumeName(""));
  EXPECT_FALSE(IsValidVolumeName(std::string(256, 'z')));
  EXPECT_FALSE(IsValidVolumeName("a b"));
  EXPECT_FALSE(IsValidVolumeName("a+b"));
}

TEST(StoreTest, VolumesAreFilledWithTheirPattern) {
  // Sizes that do not divide evenly into the fill threads' page-aligned slices:
  // smaller than the thread count, and w * 4096 + 1 for every thread count w
  // the store may use (the last byte past w page-aligned slices).
  std::vector<VolumeSpec> specs = {{"one", 1, {}, {}},
                                   {"seven", 7, {}, {}},
                                   {"odd", 100003, {}, {}},
                                   {"page", 4096, {}, {}},
                                   {"big", (8 << 20) + 7, {}, {}}};
  for (uint64_t w = 2; w <= 8; ++w)
    specs.push_back({absl::StrCat("w", w), w * 4096 + 1, {}, {}});
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Create(specs);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_EQ((*store)->Volumes().size(), specs.size());
  for (const VolumeSpec& spec : specs) {
    std::shared_ptr<const Volume> v = (*store)->Find(spec.name);
    ASSERT_NE(v, nullptr) << spec.name;
    EXPECT_EQ(v->name(), spec.name);
    EXPECT_EQ(v->size(), spec.size);
    std::span<const std::byte> bytes(v->data(), v->size());
    EXPECT_EQ(PatternMismatch(PatternSeed(spec.name), 0, bytes), std::nullopt) << spec.name;
  }
  // Each volume carries its own stream, not a shared one.
  std::shared_ptr<const Volume> odd = (*store)->Find("odd");
  EXPECT_TRUE(
      PatternMismatch(PatternSeed("big"), 0, std::span<const std::byte>(odd->data(), 4096))
          .has_value());
}

TEST(StoreTest, FindAbsentIsNull) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Create({{"vol0", 4096, {}, {}}});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Find("vol1"), nullptr);
  EXPECT_EQ((*store)->Find(""), nullptr);
  EXPECT_EQ((*store)->Find("VOL0"), nullptr);
  EXPECT_NE((*store)->Find("vol0"), nullptr);
}

TEST(StoreTest, VolumesAreWritable) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Create({{"vol0", 8192, {}, {}}});
  ASSERT_TRUE(store.ok()) << store.status();
  std::shared_ptr<const Volume> v = (*store)->Find("vol0");
  v->data()[8191] = ~v->data()[8191];
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), 0,
                            std::span<const std::byte>(v->data(), 8192)),
            8191u);
}

TEST(StoreTest, DuplicateNamesAreAlreadyExists) {
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Create({{"vol0", 4096, {}, {}}, {"vol1", 4096, {}, {}}, {"vol0", 8192, {}, {}}});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(store.status().message(), HasSubstr("vol0"));
}

TEST(StoreTest, UnmappableSizeIsResourceExhausted) {
  // 4 EiB is beyond any x86-64/arm64 user address space, even with MAP_NORESERVE.
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Create({{"huge", 1ull << 62, {}, {}}});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(store.status().message(), HasSubstr("huge"));
}

TEST(StoreTest, EmptyStore) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Create({});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->Volumes().empty());
}

TEST(StoreTest, VolumeOptionsParse) {
  absl::StatusOr<VolumeSpec> spec =
      ParseVolumeSpec("nvme0=1GiB,file=/var/lib/gdrstored/nvme0.img,latency_us=80,bandwidth=3GiB/s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->size, 1ull << 30);
  EXPECT_EQ(spec->file, "/var/lib/gdrstored/nvme0.img");
  EXPECT_EQ(spec->media.latency_us, 80u);
  EXPECT_EQ(spec->media.bandwidth, 3ull << 30);
  spec = ParseVolumeSpec("hdd=1MiB,bandwidth=200MiB");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->media.bandwidth, 200u << 20);
  EXPECT_EQ(spec->file, "");
  for (const char* bad : {"v=1MiB,file=rel/path", "v=1MiB,latency_us=-1", "v=1MiB,latency_us=x",
                          "v=1MiB,bandwidth=fast", "v=1MiB,colour=red", "v=1MiB,file=",
                          "v=1MiB,latency_us=1,latency_us=2", "v=1MiB,file"}) {
    absl::StatusOr<VolumeSpec> s = ParseVolumeSpec(bad);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.status().message(), HasSubstr("'v'")) << bad;
  }
}

// A preset applies first wherever it is written; explicit options override its figures; every
// preset's settings print back to options that parse to the same settings.
TEST(StoreTest, MediaPresetsAndOverrides) {
  absl::StatusOr<VolumeSpec> spec = ParseVolumeSpec("d=1MiB,media=hdd");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->media.preset, "hdd");
  EXPECT_EQ(spec->media.bandwidth, 270'000'000u);
  EXPECT_EQ(spec->media.queue_depth, 1u);
  EXPECT_GT(spec->media.p99_us, spec->media.latency_us);
  spec = ParseVolumeSpec("d=1MiB,queue_depth=4,media=nvme-gen4,latency_us=90,seed=7");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->media.queue_depth, 4u);
  EXPECT_EQ(spec->media.latency_us, 90u);
  EXPECT_EQ(spec->media.read_bandwidth, 7'450'000'000u);
  EXPECT_EQ(spec->media.write_iops, 1'550'000u);
  EXPECT_EQ(spec->media.seed, 7u);
  spec = ParseVolumeSpec(
      "d=1MiB,latency_us=2000,p99_us=9000,read_bandwidth=40MiB/s,write_bandwidth=20MiB,"
      "iops=3000,read_iops=2000,write_iops=1000,queue_depth=16");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->media.p99_us, 9000u);
  EXPECT_EQ(spec->media.read_bandwidth, 40u << 20);
  EXPECT_EQ(spec->media.write_bandwidth, 20u << 20);
  EXPECT_EQ(spec->media.iops, 3000u);
  EXPECT_EQ(spec->media.read_iops, 2000u);
  EXPECT_EQ(spec->media.write_iops, 1000u);
  EXPECT_EQ(FormatMediaSettings(spec->media),
            "latency_us=2000,p99_us=9000,read_bandwidth=40MiB/s,write_bandwidth=20MiB/s,"
            "iops=3000,read_iops=2000,write_iops=1000,queue_depth=16");
  for (const std::string& preset : MediaPresetNames()) {
    for (const std::string& extra : {std::string(), std::string(",read_iops=0,latency_us=5")}) {
      spec = ParseVolumeSpec("d=1MiB,media=" + preset + extra);
      ASSERT_TRUE(spec.ok()) << preset << extra << ": " << spec.status();
      EXPECT_TRUE(spec->media.enabled()) << preset;
      const std::string text = FormatMediaSettings(spec->media);
      absl::StatusOr<VolumeSpec> again = ParseVolumeSpec("d=1MiB," + text);
      ASSERT_TRUE(again.ok()) << text << ": " << again.status();
      EXPECT_EQ(again->media, spec->media) << text;
    }
  }
}

// Every bad media value is refused naming the option (and the volume).
TEST(StoreTest, BadMediaValuesNameTheOption) {
  const std::pair<const char*, const char*> cases[] = {
      {"v=1MiB,media=floppy", "media 'floppy' must be a preset: nvme-gen4, nvme-gen5"},
      {"v=1MiB,latency_us=60000001", "latency_us '60000001' must be an integer 0..60000000"},
      {"v=1MiB,p99_us=x", "p99_us 'x'"},
      {"v=1MiB,p99_us=500", "p99_us=500 needs latency_us"},
      {"v=1MiB,latency_us=500,p99_us=100", "p99_us=100 must be at least latency_us=500"},
      {"v=1MiB,read_bandwidth=fast", "read_bandwidth 'fast' must be SIZE/s"},
      {"v=1MiB,write_bandwidth=-1", "write_bandwidth '-1'"},
      // 2^63 B/s once wrapped the timing's signed arithmetic into negative transfer times.
      {"v=1MiB,bandwidth=9223372036854775808", "bandwidth '9223372036854775808' must be at most 1PiB/s"},
      {"v=1MiB,read_bandwidth=2048TiB/s", "read_bandwidth '2048TiB/s' must be at most 1PiB/s"},
      {"v=1MiB,iops=1.5", "iops '1.5'"},
      {"v=1MiB,read_iops=100000001", "read_iops '100000001'"},
      {"v=1MiB,write_iops=x", "write_iops 'x'"},
      {"v=1MiB,queue_depth=65537", "queue_depth '65537' must be an integer 0..65536"},
      {"v=1MiB,seed=-3", "seed '-3'"},
      {"v=1MiB,media=hdd,media=hdd", "option 'media' given twice"},
  };
  for (const auto& [text, want] : cases) {
    absl::StatusOr<VolumeSpec> s = ParseVolumeSpec(text);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(s.status().message(), HasSubstr(want)) << text;
    EXPECT_THAT(s.status().message(), HasSubstr("'v'")) << text;
  }
}

// A file-backed volume: created and pattern-filled when missing (no .partial left behind),
// kept with its bytes when present, refused when its size differs.
TEST(StoreTest, FileVolumeCreateKeepAndRefuseResize) {
  std::string dir = std::filesystem::temp_directory_path() / "store_test.XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string path = dir + "/v.img";
  {
    auto v = Volume::Create({"v", 3 * 4096 + 5, path, {}});
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_TRUE((*v)->created());
    EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
    EXPECT_EQ(std::filesystem::file_size(path), 3 * 4096u + 5);
    EXPECT_FALSE(PatternMismatch(PatternSeed("v"), 0,
                                 std::span<const std::byte>((*v)->data(), (*v)->size())));
    (*v)->data()[4097] = std::byte{0x5a};
    EXPECT_TRUE((*v)->Sync(4097, 1).ok());
  }
  {
    auto v = Volume::Create({"v", 3 * 4096 + 5, path, {}});
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_FALSE((*v)->created());
    EXPECT_EQ((*v)->data()[4097], std::byte{0x5a});
  }
  auto wrong = Volume::Create({"v", 4096, path, {}});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::filesystem::file_size(path), 3 * 4096u + 5);
  auto missing_dir = Volume::Create({"v", 4096, dir + "/no/such/dir/v.img", {}});
  EXPECT_EQ(missing_dir.status().code(), absl::StatusCode::kNotFound) << missing_dir.status();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gdr
