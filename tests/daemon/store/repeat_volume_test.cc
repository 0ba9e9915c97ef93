// Unit tests of repeating memory volumes (daemon/store/store.h, `repeat=SIZE`): the option's
// parsing and refusals, and the aliasing of one period of memory over the volume's range.
#include <unistd.h>

#include <cstdint>
#include <span>

#include "absl/strings/str_cat.h"
#include "common/base/pattern.h"
#include "daemon/store/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;

uint64_t Page() { return static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)); }

std::span<const std::byte> Bytes(const Volume& v, uint64_t offset, uint64_t n) {
  return {v.data() + offset, n};
}

TEST(RepeatVolumeTest, ParsesRepeat) {
  absl::StatusOr<VolumeSpec> spec = ParseVolumeSpec("v=64KiB,repeat=16KiB");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->size, 64u << 10);
  EXPECT_EQ(spec->repeat, 16u << 10);
  spec = ParseVolumeSpec("v=1MiB,media=hdd,repeat=64KiB,latency_us=5");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->repeat, 64u << 10);
  EXPECT_EQ(spec->media.latency_us, 5u);
  spec = ParseVolumeSpec("v=64KiB,repeat=64KiB");  // one period: every byte its own
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->repeat, 64u << 10);
  spec = ParseVolumeSpec("v=64KiB");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->repeat, 0u);
}

TEST(RepeatVolumeTest, BadRepeatsNameTheOption) {
  const std::string too_many = absl::StrCat("v=", (kMaxRepeatPeriods + 1) * Page(),
                                            ",repeat=", Page());
  for (const std::string& bad :
       {std::string("v=64KiB,repeat=0"), std::string("v=64KiB,repeat=0KiB"),
        std::string("v=64KiB,repeat=abc"), std::string("v=64KiB,repeat=-4KiB"),
        std::string("v=64KiB,repeat=99999999999999999999"),
        std::string("v=64KiB,repeat=16777216TiB"), std::string("v=64KiB,repeat=100"),
        std::string("v=64KiB,repeat=24KiB"), std::string("v=64KiB,repeat=128KiB"),
        std::string("v=64KiB,file=/tmp/v.img,repeat=16KiB"),
        std::string("v=64KiB,repeat=16KiB,file=/tmp/v.img"),
        std::string("v=64KiB,repeat=16KiB,repeat=16KiB"), too_many}) {
    absl::StatusOr<VolumeSpec> s = ParseVolumeSpec(bad);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.status().message(), HasSubstr("repeat")) << bad;
    EXPECT_THAT(s.status().message(), HasSubstr("'v'")) << bad;
  }
  // A repeat shapes the volume, not its device: no media option, so no --volume-dir option.
  absl::StatusOr<MediaSettings> m = ParseMediaOptions("d", "latency_us=5,repeat=4KiB");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("repeat is not a media option"));
}

// What Admin CreateVolume's `media` field carries: the options after NAME=SIZE, file= aside.
TEST(RepeatVolumeTest, VolumeOptions) {
  absl::StatusOr<VolumeSpec> spec = ParseVolumeOptions("v", 1 << 20, "repeat=256KiB,seed=3");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->size, 1u << 20);
  EXPECT_EQ(spec->repeat, 256u << 10);
  EXPECT_EQ(spec->media.seed, 3u);
  spec = ParseVolumeOptions("v", 1 << 20, "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->repeat, 0u);
  spec = ParseVolumeOptions("v", 1 << 20, "repeat=384KiB");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("repeat"));
  spec = ParseVolumeOptions("v", 1 << 20, "file=/tmp/v.img");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("file"));
}

TEST(RepeatVolumeTest, PeriodsAliasOneMemory) {
  const uint64_t period = 2 * Page();
  VolumeSpec spec;
  spec.name = "rep";
  spec.size = 4 * period;
  spec.repeat = period;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Create({spec});
  ASSERT_TRUE(store.ok()) << store.status();
  std::shared_ptr<const Volume> v = (*store)->Find("rep");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->size(), 4 * period);
  EXPECT_EQ(v->repeat(), period);
  EXPECT_EQ(v->backing(), absl::StrCat("memory,repeat=", period));
  const uint64_t seed = PatternSeed("rep");
  // Byte o reads as the pattern at o mod period, in every period.
  for (uint64_t p = 0; p < 4; ++p) {
    EXPECT_EQ(PatternMismatch(seed, 0, Bytes(*v, p * period, period)), std::nullopt) << p;
  }
  // A get across a period boundary: the period's end, then its start again.
  EXPECT_EQ(PatternMismatch(seed, period - 100, Bytes(*v, period - 100, 100)), std::nullopt);
  EXPECT_EQ(PatternMismatch(seed, 0, Bytes(*v, period, 100)), std::nullopt);
  // A put at o shows at every o + k * period (and one in the last period at its first).
  const uint64_t o = 123;
  const std::byte was = v->data()[o];
  v->data()[o] = ~was;
  for (uint64_t p = 0; p < 4; ++p) EXPECT_EQ(v->data()[p * period + o], ~was) << p;
  v->data()[3 * period + 7] = std::byte{0x5a};
  EXPECT_EQ(v->data()[7], std::byte{0x5a});
  EXPECT_EQ(PatternMismatch(seed, 0, Bytes(*v, 2 * period, period)), 7u);
}

// The point of it: an address range far past the memory it holds (here 64 GiB over 4 MiB, the
// most periods there may be), every byte readable as its pattern.
TEST(RepeatVolumeTest, RangePastMemory) {
  VolumeSpec spec;
  spec.name = "big";
  spec.repeat = 4 << 20;
  spec.size = kMaxRepeatPeriods * spec.repeat;
  absl::StatusOr<std::unique_ptr<Volume>> v = Volume::Create(spec);
  ASSERT_TRUE(v.ok()) << v.status();
  const uint64_t seed = PatternSeed("big");
  const uint64_t last = spec.size - Page();
  EXPECT_EQ(PatternMismatch(seed, last % spec.repeat, Bytes(**v, last, Page())), std::nullopt);
  EXPECT_EQ(PatternMismatch(seed, 0, Bytes(**v, spec.size / 2, Page())), std::nullopt);
}

// A spec made in code is checked as a parsed one is.
TEST(RepeatVolumeTest, CreateRefusesABadSpec) {
  VolumeSpec spec;
  spec.name = "odd";
  spec.size = 3 * Page();
  spec.repeat = 2 * Page();
  absl::StatusOr<std::unique_ptr<Volume>> v = Volume::Create(spec);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(), HasSubstr("repeat"));
  VolumeSpec plain;
  plain.name = "plain";
  plain.size = Page();
  absl::StatusOr<std::unique_ptr<Volume>> made = Volume::Create(plain);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ((*made)->backing(), "memory");
  EXPECT_EQ((*made)->repeat(), 0u);
}

}  // namespace
}  // namespace gdr
