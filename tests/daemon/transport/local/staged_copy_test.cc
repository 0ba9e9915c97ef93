// The staged GPU copy pipeline (daemon/transport/local/staged_copy.h) against a fake device whose
// copies happen late, when they are waited for, as a DMA from a bounce slot does: a slot
// refilled (or drained) before its copy was waited for would corrupt the bytes. Store bytes from
// memory and from a real file read with pread, a file cut short, a device failure midway, and
// puts back into the store, with one, two and three slots.
#include "daemon/transport/local/staged_copy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/store/mapping_guard.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gdr {
namespace {

using ::testing::HasSubstr;

std::vector<std::byte> Pattern(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    v[i] = static_cast<std::byte>(x >> 24);
  }
  return v;
}

// Device memory whose copies run when waited for. Starting a copy on a slot whose last copy
// was not waited for is refused (as cuda::AsyncCopier does).
class LateDevice final : public StagedDevice {
 public:
  explicit LateDevice(size_t bytes) : mem(bytes) {}
  absl::Status StartToDevice(int slot, uint64_t offset, const std::byte* host,
                             size_t n) override {
    return Start(slot, Pending{true, offset, const_cast<std::byte*>(host), n, true});
  }
  absl::Status StartToHost(int slot, std::byte* host, uint64_t offset, size_t n) override {
    return Start(slot, Pending{false, offset, host, n, true});
  }
  absl::Status Wait(int slot) override {
    if (pending_.size() <= static_cast<size_t>(slot)) return absl::OkStatus();
    Pending& p = pending_[static_cast<size_t>(slot)];
    if (!p.set) return absl::OkStatus();
    p.set = false;
    --in_flight_;
    if (p.to_device) {
      std::memcpy(mem.data() + p.offset, p.host, p.n);
    } else {
      std::memcpy(p.host, mem.data() + p.offset, p.n);
    }
    return absl::OkStatus();
  }

  std::vector<std::byte> mem;
  int fail_at = -1;  // the start that fails (0-based), -1: none
  int starts = 0;
  int most_in_flight = 0;
  int in_flight() const { return in_flight_; }

 private:
  struct Pending {
    bool to_device = false;
    uint64_t offset = 0;
    std::byte* host = nullptr;
    size_t n = 0;
    bool set = false;  // a copy waits to be waited for
  };
  absl::Status Start(int slot, Pending p) {
    if (pending_.size() <= static_cast<size_t>(slot)) pending_.resize(slot + 1);
    if (pending_[slot].set) return absl::InternalError(absl::StrCat("slot ", slot, " busy"));
    if (starts++ == fail_at) return absl::InternalError("the device failed");
    if (p.offset + p.n > mem.size()) return absl::OutOfRangeError("outside the device");
    pending_[slot] = p;
    ++in_flight_;
    most_in_flight = std::max(most_in_flight, in_flight_);
    return absl::OkStatus();
  }
  std::vector<Pending> pending_;
  int in_flight_ = 0;
};

// Bounce slots as plain memory (the pipeline does not care that they are page-locked).
struct Slots {
  Slots(int count, size_t bytes) : memory(count * bytes) {
    for (int i = 0; i < count; ++i) ptrs.push_back(memory.data() + i * bytes);
  }
  std::vector<std::byte> memory;
  std::vector<std::byte*> ptrs;
};

TEST(StagedCopyTest, GetsFromMemoryLandWholeWithAnySlotCount) {
  const size_t n = (1 << 20) + 12345;
  const std::vector<std::byte> store = Pattern(n + 100, 1);
  for (int count : {1, 2, 3}) {
    LateDevice dev(n + 500);
    Slots slots(count, 64 << 10);
    StoreBytes bytes{const_cast<std::byte*>(store.data()) + 100, -1, 0};
    ASSERT_TRUE(StagedCopy(dev, 300, bytes, n, Direction::kStoreToClient, slots.ptrs, 64 << 10)
                    .ok());
    EXPECT_EQ(std::memcmp(dev.mem.data() + 300, store.data() + 100, n), 0) << count;
    EXPECT_EQ(dev.mem[299], std::byte{0});
    EXPECT_EQ(dev.mem[300 + n], std::byte{0});
    EXPECT_EQ(dev.in_flight(), 0) << count;
    // Copies overlapped the filling of the next slot, up to one per slot.
    EXPECT_EQ(dev.most_in_flight, count) << count;
  }
}

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InstallMappingGuard();
    char tmpl[] = "/tmp/gdr-staged-XXXXXX";
    fd_ = ::mkstemp(tmpl);
    ASSERT_GE(fd_, 0);
    path_ = tmpl;
    content_ = Pattern(kSize, 7);
    ASSERT_EQ(::pwrite(fd_, content_.data(), kSize, 0), static_cast<ssize_t>(kSize));
    void* p = ::mmap(nullptr, kSize, PROT_READ, MAP_SHARED, fd_, 0);
    ASSERT_NE(p, MAP_FAILED);
    map_ = static_cast<std::byte*>(p);
    RegisterFileMapping(map_, kSize, "vol", path_);
  }
  void TearDown() override {
    if (map_ != nullptr) {
      UnregisterFileMapping(map_);
      ::munmap(map_, kSize);
    }
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  static constexpr size_t kSize = 3 << 20;
  int fd_ = -1;
  std::string path_;
  std::vector<std::byte> content_;
  std::byte* map_ = nullptr;
};

TEST_F(FileTest, GetsFromAFileReadItWithPread) {
  const uint64_t at = 4096 + 77;
  const size_t n = (2 << 20) + 5;
  LateDevice dev(n);
  Slots slots(2, 256 << 10);
  // The bytes come from the file, not from `data` (here zeros standing for the mapping).
  std::vector<std::byte> zeros(kSize);
  StoreBytes bytes{zeros.data() + at, fd_, at};
  ASSERT_TRUE(
      StagedCopy(dev, 0, bytes, n, Direction::kStoreToClient, slots.ptrs, 256 << 10).ok());
  EXPECT_EQ(std::memcmp(dev.mem.data(), content_.data() + at, n), 0);
}

TEST_F(FileTest, AFileCutShortIsDataLossNamingTheVolume) {
  ASSERT_EQ(::ftruncate(fd_, 1 << 20), 0);
  LateDevice dev(2 << 20);
  Slots slots(2, 256 << 10);
  StoreBytes bytes{map_ + 4096, fd_, 4096};
  absl::Status s =
      StagedCopy(dev, 0, bytes, 2 << 20, Direction::kStoreToClient, slots.ptrs, 256 << 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("vol"));
  EXPECT_EQ(dev.in_flight(), 0);  // what it started was waited for
  // The whole slots before the end arrived.
  EXPECT_EQ(std::memcmp(dev.mem.data(), content_.data() + 4096, 3 * (256 << 10)), 0);
}

TEST(StagedCopyTest, PutsDrainEachSlotOnlyAfterItsCopy) {
  const size_t n = (1 << 20) + 999;
  for (int count : {1, 2, 3}) {
    LateDevice dev(n + 64);
    const std::vector<std::byte> src = Pattern(n, 3);
    std::memcpy(dev.mem.data() + 64, src.data(), n);
    std::vector<std::byte> store(n + 10);
    Slots slots(count, 100 << 10);
    StoreBytes bytes{store.data() + 10, -1, 0};
    ASSERT_TRUE(StagedCopy(dev, 64, bytes, n, Direction::kClientToStore, slots.ptrs, 100 << 10)
                    .ok())
        << count;
    EXPECT_EQ(std::memcmp(store.data() + 10, src.data(), n), 0) << count;
    EXPECT_EQ(store[9], std::byte{0});
    EXPECT_EQ(dev.in_flight(), 0);
    EXPECT_EQ(dev.most_in_flight, count) << count;
  }
}

TEST(StagedCopyTest, ADeviceFailureMidwayEndsItWithNothingInFlight) {
  const size_t n = 1 << 20;
  const std::vector<std::byte> store = Pattern(n, 5);
  for (Direction d : {Direction::kStoreToClient, Direction::kClientToStore}) {
    LateDevice dev(n);
    dev.fail_at = 3;
    std::vector<std::byte> out(n);
    Slots slots(2, 64 << 10);
    StoreBytes bytes{d == Direction::kStoreToClient ? const_cast<std::byte*>(store.data())
                                                     : out.data(),
                     -1, 0};
    absl::Status s = StagedCopy(dev, 0, bytes, n, d, slots.ptrs, 64 << 10);
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("the device failed"));
    EXPECT_EQ(dev.in_flight(), 0);
    EXPECT_EQ(dev.starts, 4);  // nothing started after the failure
  }
}

TEST(StagedCopyTest, NoSlotIsAnErrorAndNoBytesNothing) {
  LateDevice dev(16);
  std::vector<std::byte> store(16);
  StoreBytes bytes{store.data(), -1, 0};
  EXPECT_EQ(StagedCopy(dev, 0, bytes, 16, Direction::kStoreToClient, {}, 4096).code(),
            absl::StatusCode::kInternal);
  Slots slots(2, 4096);
  EXPECT_TRUE(StagedCopy(dev, 0, bytes, 0, Direction::kStoreToClient, slots.ptrs, 4096).ok());
  EXPECT_EQ(dev.starts, 0);
  // Past the device's end: its refusal.
  EXPECT_EQ(StagedCopy(dev, 8, bytes, 16, Direction::kStoreToClient, slots.ptrs, 4096).code(),
            absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace gdr
