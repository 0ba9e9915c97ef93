// Writes and Reads into real GPU memory through the tcp transport: a real gdrstored, the client
// library's tcp target staging through pinned memory, and every byte checked after a copy back
// from the device. Sizes 4 KiB .. 256 MiB, unaligned offsets, two clients on one GPU at once,
// and device memory the caller owns. Skipped (with the reason) on hosts without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cuda/gpu.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kMaxOp = 256 * kMiB;

absl::Status CheckPattern(const gdrstore::Buffer& buffer, size_t buffer_offset,
                          const std::string& volume, uint64_t offset, uint64_t length,
                          uint64_t salt) {
  std::vector<std::byte> got(length);
  if (absl::Status s = buffer.CopyOut(buffer_offset, got.data(), length); !s.ok()) return s;
  if (auto bad = gdr::PatternMismatch(gdr::PatternSeed(volume, salt), offset, got)) {
    return absl::DataLossError(absl::StrCat("byte ", *bad, " of ", volume, "@", offset, "+",
                                            length, " (salt ", salt, ") differs in GPU memory"));
  }
  return absl::OkStatus();
}

// Write (store -> GPU) of volume@offset+length, verified; the range is poisoned first.
absl::Status VerifiedGpuWrite(gdrstore::Client& client, const gdrstore::Buffer& buffer,
                              size_t buffer_offset, const std::string& volume, uint64_t offset,
                              uint64_t length, uint64_t salt) {
  std::vector<std::byte> poison(length, std::byte{0xa5});
  if (absl::Status s = buffer.CopyIn(buffer_offset, poison.data(), length); !s.ok()) return s;
  absl::StatusOr<gdrstore::OpResult> r =
      client.Write(gdrstore::Extent{volume, offset, length}, buffer, buffer_offset);
  if (!r.ok()) return r.status();
  if (r->bytes != length) return absl::DataLossError(absl::StrCat("moved ", r->bytes));
  return CheckPattern(buffer, buffer_offset, volume, offset, length, salt);
}

// Read (GPU -> store) of the salted pattern, proven by a verified Write into `check`.
absl::Status VerifiedGpuRead(gdrstore::Client& client, const gdrstore::Buffer& src,
                             const gdrstore::Buffer& check, const std::string& volume,
                             uint64_t offset, uint64_t length, uint64_t salt) {
  std::vector<std::byte> pattern(length);
  gdr::PatternFill(gdr::PatternSeed(volume, salt), offset, pattern);
  if (absl::Status s = src.CopyIn(0, pattern.data(), length); !s.ok()) return s;
  absl::StatusOr<gdrstore::OpResult> r =
      client.Read(gdrstore::Extent{volume, offset, length}, src, 0);
  if (!r.ok()) return r.status();
  return VerifiedGpuWrite(client, check, 0, volume, offset, length, salt);
}

class GpuDataPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<gdr::cuda::GpuInfo>> gpus = gdr::cuda::ListGpus();
    if (!gpus.ok()) GTEST_SKIP() << "no GPU on this host: " << gpus.status().message();
    gpu_ = gpus->front();
    auto d = DaemonProcess::Start({"--volume", "vol0=512MiB", "--volume", "rw=512MiB",
                                   "--max-op-size", absl::StrCat(kMaxOp)});
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
  }
  std::unique_ptr<gdrstore::Client> NewClient() {
    gdrstore::ClientOptions o;
    o.daemon_address = daemon_->address();
    auto c = gdrstore::Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  gdr::cuda::GpuInfo gpu_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(GpuDataPathTest, WriteAndReadEverySize) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto src = client->AllocateGpuBuffer(gpu_.pci, kMaxOp);
  ASSERT_TRUE(src.ok()) << src.status();
  auto check = client->AllocateGpuBuffer(std::to_string(gpu_.ordinal), kMaxOp);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE((*src)->on_gpu());
  EXPECT_EQ((*src)->data(), nullptr);
  EXPECT_EQ((*src)->gpu_pci(), gpu_.pci);
  uint64_t salt = 100;
  for (uint64_t size : std::vector<uint64_t>{4 * 1024, 64 * 1024, kMiB, 4 * kMiB + 123, 16 * kMiB, 64 * kMiB,
                        256 * kMiB}) {
    SCOPED_TRACE(absl::StrCat("size ", size));
    const uint64_t offset = size == kMaxOp ? 0 : 4096 * 3;
    EXPECT_TRUE(VerifiedGpuWrite(*client, **src, 0, "vol0", offset, size, 0).ok());
    absl::Status s = VerifiedGpuRead(*client, **src, **check, "rw", offset, size, ++salt);
    EXPECT_TRUE(s.ok()) << s;
  }
  const gdrstore::TargetStats st = client->transport_info().target;
  EXPECT_GT(st.gpu_bytes_to_device, 256 * kMiB);
  EXPECT_GT(st.gpu_bytes_from_device, 256 * kMiB);
  EXPECT_EQ(st.refused, 0u);
}

TEST_F(GpuDataPathTest, UnalignedOffsetsLeaveNeighboursAlone) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  const size_t len = kMiB + 7, boff = 3;
  auto buf = client->AllocateGpuBuffer(gpu_.pci, len + 64);
  ASSERT_TRUE(buf.ok()) << buf.status();
  std::vector<std::byte> fill(len + 64, std::byte{0x5c});
  ASSERT_TRUE((*buf)->CopyIn(0, fill.data(), fill.size()).ok());
  auto r = client->Write(gdrstore::Extent{"vol0", 5, len}, **buf, boff);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(CheckPattern(**buf, boff, "vol0", 5, len, 0).ok());
  std::vector<std::byte> all(len + 64);
  ASSERT_TRUE((*buf)->CopyOut(0, all.data(), all.size()).ok());
  for (size_t i = 0; i < boff; ++i) EXPECT_EQ(all[i], std::byte{0x5c}) << i;
  for (size_t i = boff + len; i < all.size(); ++i) EXPECT_EQ(all[i], std::byte{0x5c}) << i;
}

TEST_F(GpuDataPathTest, OutOfBoundsIsRefusedAndGpuUntouched) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto buf = client->AllocateGpuBuffer(gpu_.pci, 4096);
  ASSERT_TRUE(buf.ok());
  auto r = client->Write(gdrstore::Extent{"vol0", 0, 8192}, **buf, 0);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GpuDataPathTest, TwoClientsOnOneGpuAtOnce) {
  constexpr uint64_t kSize = 8 * kMiB;
  constexpr int kRounds = 8;
  std::vector<std::unique_ptr<gdrstore::Client>> clients;
  for (int i = 0; i < 2; ++i) {
    clients.push_back(NewClient());
    ASSERT_NE(clients.back(), nullptr);
  }
  std::vector<absl::Status> results(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) {
    threads.emplace_back([&, i] {
      gdrstore::Client& c = *clients[i];
      auto src = c.AllocateGpuBuffer(gpu_.pci, kSize);
      auto check = c.AllocateGpuBuffer(gpu_.pci, kSize);
      if (!src.ok() || !check.ok()) {
        results[i] = src.ok() ? check.status() : src.status();
        return;
      }
      for (int round = 0; round < kRounds && results[i].ok(); ++round) {
        const uint64_t offset = (i * kRounds + round) * kSize;  // disjoint per client
        results[i] = VerifiedGpuWrite(c, **src, 0, "vol0", offset, kSize, 0);
        if (results[i].ok()) {
          results[i] = VerifiedGpuRead(c, **src, **check, "rw", offset, kSize,
                                       1000 + i * kRounds + round);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(results[0].ok()) << results[0];
  EXPECT_TRUE(results[1].ok()) << results[1];
}

// Device memory the caller allocated (here cuMemAlloc through the project's wrapper; torch and
// CuPy allocations are tested from Python by tests/gpu/run-gpu-tests.sh), registered in place:
// verified both ways, found on the right GPU from the pointer alone, registered once for the
// same range, and refused naming the pointer when it is host memory or runs past its end.
TEST_F(GpuDataPathTest, CallerOwnedDeviceMemoryIsRegisteredInPlace) {
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  constexpr uint64_t kSize = 16 * kMiB;
  auto mine = gdr::cuda::DeviceMemory::Create(gpu_.ordinal, kSize + 4096);
  ASSERT_TRUE(mine.ok()) << mine.status();
  const uint64_t ptr = (*mine)->ptr() + 4096;
  auto buf = client->RegisterGpuMemory(ptr, kSize);
  ASSERT_TRUE(buf.ok()) << buf.status();
  EXPECT_TRUE((*buf)->on_gpu());
  EXPECT_EQ((*buf)->gpu_ordinal(), gpu_.ordinal);
  EXPECT_EQ((*buf)->gpu_pci(), gpu_.pci);
  EXPECT_EQ((*buf)->address(), ptr);
  auto again = client->RegisterGpuMemory(ptr, kSize);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->rkey(), (*buf)->rkey());
  EXPECT_EQ(client->registration_stats().hits, 1u);
  auto check = client->AllocateGpuBuffer(gpu_.pci, kSize);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(VerifiedGpuWrite(*client, **buf, 0, "vol0", 3 * kMiB + 5, kSize, 0).ok());
  EXPECT_TRUE(VerifiedGpuRead(*client, **buf, **check, "rw", 0, kSize, 42).ok());
  // The bytes are in the caller's own allocation, not in a copy.
  std::vector<std::byte> raw(kSize);
  ASSERT_TRUE((*mine)->CopyToHost(4096, raw.data(), kSize).ok());
  EXPECT_EQ(gdr::PatternMismatch(gdr::PatternSeed("rw", 42), 0, raw), std::nullopt);

  std::vector<std::byte> host(4096);
  auto not_gpu = client->RegisterGpuMemory(reinterpret_cast<uint64_t>(host.data()), host.size());
  EXPECT_EQ(not_gpu.status().code(), absl::StatusCode::kInvalidArgument) << not_gpu.status();
  // The library rounds its allocations to 2 MiB: the end is the allocation's, not kSize's.
  auto alloc = gdr::cuda::AllocationOf(ptr);
  ASSERT_TRUE(alloc.ok()) << alloc.status();
  auto past_end = client->RegisterGpuMemory(ptr, alloc->base + alloc->size - ptr + 1);
  EXPECT_EQ(past_end.status().code(), absl::StatusCode::kInvalidArgument) << past_end.status();
  EXPECT_NE(past_end.status().message().find("past the end"), std::string::npos)
      << past_end.status();
}

}  // namespace
}  // namespace gdr::integ
