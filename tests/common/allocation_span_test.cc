// The walk over the allocations a GPU range lies in, through the CUDA seam: a fake address
// space stands for the driver's answers (what holds an address), so the rules are checked
// here, without a GPU: one cudaMalloc allocation, or VMM chunks side by side (PyTorch's
// expandable segments), ranges over 1, 2 and many chunks, starting or ending inside one, and
// the ranges that cannot be handed over as one region.
#include "common/cuda/allocation_span.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr::cuda {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kChunk = 20 * kMiB;  // PyTorch's expandable segments map 20 MiB at a time

// Allocations by base; an address no allocation holds is what the driver refuses.
class FakeAddressSpace {
 public:
  void Add(AllocationKind kind, uint64_t base, uint64_t size, int ordinal = 0) {
    allocations_[base] = AllocationAt{kind, base, size, ordinal};
  }
  // `count` chunks of `size` side by side from `base`.
  void AddChunks(uint64_t base, uint64_t size, int count, int ordinal = 0) {
    for (int i = 0; i < count; ++i) Add(AllocationKind::kVmm, base + i * size, size, ordinal);
  }
  FindAllocation Find() {
    return [this](uint64_t address) -> absl::StatusOr<AllocationAt> {
      ++calls;
      auto it = allocations_.upper_bound(address);
      if (it != allocations_.begin()) {
        --it;
        if (address - it->second.base < it->second.size) return it->second;
      }
      return absl::InvalidArgumentError("not device memory the driver knows");
    };
  }
  int calls = 0;

 private:
  std::map<uint64_t, AllocationAt> allocations_;
};

constexpr uint64_t kBase = 0x7f0000000000;

TEST(AllocationSpan, ARangeInsideOneChunkIsThatChunk) {
  FakeAddressSpace space;
  space.AddChunks(kBase, kChunk, 4);
  auto pieces = AllocationsOfRange(kBase + kChunk + 100, 5 * kMiB, space.Find(), 64);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  ASSERT_EQ(pieces->size(), 1u);
  EXPECT_EQ((*pieces)[0].base, kBase + kChunk);
  EXPECT_EQ((*pieces)[0].size, kChunk);
}

TEST(AllocationSpan, ARangeEndingExactlyAtAChunksEndTakesNoMore) {
  FakeAddressSpace space;
  space.AddChunks(kBase, kChunk, 4);
  auto pieces = AllocationsOfRange(kBase, kChunk, space.Find(), 64);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  EXPECT_EQ(pieces->size(), 1u);
  // One byte more reaches into the second.
  pieces = AllocationsOfRange(kBase, kChunk + 1, space.Find(), 64);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  ASSERT_EQ(pieces->size(), 2u);
  EXPECT_EQ((*pieces)[1].base, kBase + kChunk);
}

TEST(AllocationSpan, ARangeStartingAndEndingInsideChunksSpansTheChunksBetween) {
  FakeAddressSpace space;
  space.AddChunks(kBase, kChunk, 10);
  // From the middle of chunk 2 to the middle of chunk 7.
  const uint64_t start = kBase + 2 * kChunk + 12345;
  const uint64_t end = kBase + 7 * kChunk + 999;
  auto pieces = AllocationsOfRange(start, end - start, space.Find(), 64);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  ASSERT_EQ(pieces->size(), 6u);
  for (size_t i = 0; i < pieces->size(); ++i) {
    EXPECT_EQ((*pieces)[i].base, kBase + (2 + i) * kChunk) << i;
    EXPECT_EQ((*pieces)[i].kind, AllocationKind::kVmm);
  }
  // The walk asks once per chunk, not once per byte or page.
  EXPECT_EQ(space.calls, 6);
}

TEST(AllocationSpan, ManyChunksOfDifferentSizes) {
  FakeAddressSpace space;
  uint64_t at = kBase;
  std::vector<uint64_t> sizes;
  for (int i = 0; i < 300; ++i) {
    const uint64_t size = (i % 3 + 1) * 2 * kMiB;
    space.Add(AllocationKind::kVmm, at, size);
    sizes.push_back(size);
    at += size;
  }
  auto pieces = AllocationsOfRange(kBase, at - kBase, space.Find(), 4096);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  ASSERT_EQ(pieces->size(), 300u);
  uint64_t expect = kBase;
  for (size_t i = 0; i < pieces->size(); ++i) {
    EXPECT_EQ((*pieces)[i].base, expect);
    EXPECT_EQ((*pieces)[i].size, sizes[i]);
    expect += sizes[i];
  }
}

TEST(AllocationSpan, MoreChunksThanTheLimitAreRefused) {
  FakeAddressSpace space;
  space.AddChunks(kBase, 2 * kMiB, 9);
  auto pieces = AllocationsOfRange(kBase, 9 * 2 * kMiB, space.Find(), 8);
  ASSERT_FALSE(pieces.ok());
  EXPECT_EQ(pieces.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(pieces.status().message(), HasSubstr("more than 8 VMM allocations"));
  EXPECT_TRUE(AllocationsOfRange(kBase, 8 * 2 * kMiB, space.Find(), 8).ok());
}

TEST(AllocationSpan, OneCudaMallocAllocationIsFineTwoAreNot) {
  FakeAddressSpace space;
  space.Add(AllocationKind::kCudaMalloc, kBase, 8 * kMiB);
  space.Add(AllocationKind::kCudaMalloc, kBase + 8 * kMiB, 8 * kMiB);
  auto one = AllocationsOfRange(kBase + 4096, 8 * kMiB - 4096, space.Find(), 64);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].kind, AllocationKind::kCudaMalloc);
  auto two = AllocationsOfRange(kBase + 4096, 8 * kMiB, space.Find(), 64);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(two.status().message(), HasSubstr("spans two cudaMalloc allocations"));
}

TEST(AllocationSpan, ChunksOfTwoKindsAreRefusedNamingBoth) {
  FakeAddressSpace space;
  space.AddChunks(kBase, kChunk, 2);
  space.Add(AllocationKind::kCudaMalloc, kBase + 2 * kChunk, kChunk);
  auto mixed = AllocationsOfRange(kBase + kChunk, 2 * kChunk, space.Find(), 64);
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mixed.status().message(), HasSubstr("two kinds"));
  EXPECT_THAT(mixed.status().message(), HasSubstr("a VMM allocation"));
  EXPECT_THAT(mixed.status().message(), HasSubstr("cudaMalloc memory"));
  // And the other way round.
  FakeAddressSpace other;
  other.Add(AllocationKind::kCudaMalloc, kBase, kChunk);
  other.AddChunks(kBase + kChunk, kChunk, 1);
  mixed = AllocationsOfRange(kBase, 2 * kChunk, other.Find(), 64);
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(mixed.status().message(), HasSubstr("two kinds"));
}

TEST(AllocationSpan, ChunksOnTwoGpusAreRefused) {
  FakeAddressSpace space;
  space.Add(AllocationKind::kVmm, kBase, kChunk, /*ordinal=*/0);
  space.Add(AllocationKind::kVmm, kBase + kChunk, kChunk, /*ordinal=*/1);
  auto split = AllocationsOfRange(kBase, 2 * kChunk, space.Find(), 64);
  ASSERT_FALSE(split.ok());
  EXPECT_THAT(split.status().message(), HasSubstr("two GPUs"));
}

TEST(AllocationSpan, ARangeRunningIntoUnmappedMemoryNamesWhere) {
  FakeAddressSpace space;
  space.AddChunks(kBase, kChunk, 2);  // reserved beyond, not mapped
  auto past = AllocationsOfRange(kBase + kChunk, 2 * kChunk, space.Find(), 64);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past.status().message(), HasSubstr("runs past the end of a VMM allocation"));
  EXPECT_THAT(past.status().message(), HasSubstr("0x7f0002800000"));  // kBase + 2 chunks
}

TEST(AllocationSpan, NothingAtTheStartIsTheDriversAnswer) {
  FakeAddressSpace space;
  auto none = AllocationsOfRange(kBase, 4096, space.Find(), 64);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("not device memory"));
}

TEST(AllocationSpan, EmptyAndWrappingRangesAreRefused) {
  FakeAddressSpace space;
  space.AddChunks(kBase, kChunk, 1);
  EXPECT_EQ(AllocationsOfRange(kBase, 0, space.Find(), 64).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto wrap = AllocationsOfRange(UINT64_MAX - 10, 100, space.Find(), 64);
  ASSERT_FALSE(wrap.ok());
  EXPECT_THAT(wrap.status().message(), HasSubstr("wraps"));
  EXPECT_EQ(space.calls, 0);
}

TEST(AllocationSpan, AnAnswerThatDoesNotHoldTheAddressIsRefused) {
  // A driver (or a fake) that answers with some other allocation must not send the walk
  // backwards or round in circles.
  int calls = 0;
  FindAllocation liar = [&](uint64_t) -> absl::StatusOr<AllocationAt> {
    ++calls;
    return AllocationAt{AllocationKind::kVmm, kBase, kChunk, 0};
  };
  auto r = AllocationsOfRange(kBase + kChunk - 1, 2, liar, 64);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("does not hold it"));
  EXPECT_EQ(calls, 2);
  FindAllocation empty = [](uint64_t a) -> absl::StatusOr<AllocationAt> {
    return AllocationAt{AllocationKind::kVmm, a, 0, 0};
  };
  EXPECT_FALSE(AllocationsOfRange(kBase, 10, empty, 64).ok());
}

}  // namespace
}  // namespace gdr::cuda
