// Unit tests of the memory store (daemon/store.h): volume specs, the initial pattern fill,
// lookups and the errors of Store::Create.
#include "daemon/store.h"

#include <span>

#include "absl/strings/str_cat.h"
#include "common/pattern.h"
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
       {std::string("=4k"), std::string(65, 'n') + "=4k", std::string("bad name=4k"),
        std::string("vol/0=4k"), std::string("vol:0=4k"), std::string("v\xc3\xa9=4k"),
        std::string("v\0l=4k", 6)}) {
    absl::StatusOr<VolumeSpec> spec = ParseVolumeSpec(text);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
  absl::StatusOr<VolumeSpec> spec = ParseVolumeSpec("vol/0=4k");
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
  EXPECT_TRUE(IsValidVolumeName(std::string(64, 'z')));
  EXPECT_FALSE(IsValidVolumeName(""));
  EXPECT_FALSE(IsValidVolumeName(std::string(65, 'z')));
  EXPECT_FALSE(IsValidVolumeName("a b"));
  EXPECT_FALSE(IsValidVolumeName("a+b"));
}

TEST(StoreTest, VolumesAreFilledWithTheirPattern) {
  // Sizes that do not divide evenly into the fill threads' page-aligned slices: smaller than
  // the thread count, and w * 4096 + 1 for every thread count w the store may use (the last
  // byte past w page-aligned slices).
  std::vector<VolumeSpec> specs = {
      {"one", 1}, {"seven", 7}, {"odd", 100003}, {"page", 4096}, {"big", (8 << 20) + 7}};
  for (uint64_t w = 2; w <= 8; ++w) specs.push_back({absl::StrCat("w", w), w * 4096 + 1});
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Create(specs);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_EQ((*store)->volumes().size(), specs.size());
  for (const VolumeSpec& spec : specs) {
    const Volume* v = (*store)->Find(spec.name);
    ASSERT_NE(v, nullptr) << spec.name;
    EXPECT_EQ(v->name(), spec.name);
    EXPECT_EQ(v->size(), spec.size);
    std::span<const std::byte> bytes(v->data(), v->size());
    EXPECT_EQ(PatternMismatch(PatternSeed(spec.name), 0, bytes), std::nullopt) << spec.name;
  }
  // Each volume carries its own stream, not a shared one.
  const Volume* odd = (*store)->Find("odd");
  EXPECT_TRUE(
      PatternMismatch(PatternSeed("big"), 0, std::span<const std::byte>(odd->data(), 4096))
          .has_value());
}

TEST(StoreTest, FindAbsentIsNull) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Create({{"vol0", 4096}});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Find("vol1"), nullptr);
  EXPECT_EQ((*store)->Find(""), nullptr);
  EXPECT_EQ((*store)->Find("VOL0"), nullptr);
  EXPECT_NE((*store)->Find("vol0"), nullptr);
}

TEST(StoreTest, VolumesAreWritable) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Create({{"vol0", 8192}});
  ASSERT_TRUE(store.ok()) << store.status();
  const Volume* v = (*store)->Find("vol0");
  v->data()[8191] = ~v->data()[8191];
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), 0, std::span<const std::byte>(v->data(), 8192)),
            8191u);
}

TEST(StoreTest, DuplicateNamesAreAlreadyExists) {
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Create({{"vol0", 4096}, {"vol1", 4096}, {"vol0", 8192}});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(store.status().message(), HasSubstr("vol0"));
}

TEST(StoreTest, UnmappableSizeIsResourceExhausted) {
  // 4 EiB is beyond any x86-64/arm64 user address space, even with MAP_NORESERVE.
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Create({{"huge", 1ull << 62}});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(store.status().message(), HasSubstr("huge"));
}

TEST(StoreTest, EmptyStore) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Create({});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->volumes().empty());
}

}  // namespace
}  // namespace gdr
