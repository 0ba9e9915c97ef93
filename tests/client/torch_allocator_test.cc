// gdrstore_torch_alloc / gdrstore_torch_free, the hooks torch.cuda.memory.CUDAPluggableAllocator
// calls (gdrstore.torch.memory_pool): without a driver no memory and the reason said once; a
// free of null, of a pointer never handed out or of one freed already harms nothing and says
// so. On a host with a GPU: the memory exports as a VMM descriptor and is gone after its free.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "common/cuda/gpu.h"
#include "common/cuda/gpu_ipc.h"
#include "gdrstore/gdrstore.h"
#include "gtest/gtest.h"

namespace {

// What the library writes to stderr (its log) between construction and Text().
class StderrCapture {
 public:
  StderrCapture() {
    fd_ = ::memfd_create("stderr", 0);
    saved_ = ::dup(2);
    ::dup2(fd_, 2);
  }
  ~StderrCapture() { Restore(); }
  std::string Text() {
    Restore();
    std::string out;
    char buf[4096];
    ::lseek(fd_, 0, SEEK_SET);
    for (ssize_t n; (n = ::read(fd_, buf, sizeof(buf))) > 0;) out.append(buf, n);
    return out;
  }

 private:
  void Restore() {
    if (saved_ < 0) return;
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  int fd_ = -1;
  int saved_ = -1;
};

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void* Bogus(uintptr_t p) { return reinterpret_cast<void*>(p); }

TEST(TorchAllocatorTest, WithoutADriverAllocReturnsNullAndSaysWhyOnce) {
  if (gdr::cuda::DriverStatus().ok()) GTEST_SKIP() << "a CUDA driver loads on this host";
  StderrCapture err;
  // GPU 3: a reason no other test here gives, as each reason is said once per process.
  EXPECT_EQ(gdrstore_torch_alloc(4096, 3, nullptr), nullptr);
  EXPECT_EQ(gdrstore_torch_alloc(size_t{2} << 20, 3, nullptr), nullptr);
  const std::string text = err.Text();
  EXPECT_EQ(Count(text, "gdrstore_torch_alloc: no memory for PyTorch: GPU 3: "), 1u) << text;
  const std::string why(gdr::cuda::DriverStatus().message());
  EXPECT_NE(text.find(why), std::string::npos) << text;
}

TEST(TorchAllocatorTest, ANegativeDeviceIsRefusedNamingIt) {
  StderrCapture err;
  EXPECT_EQ(gdrstore_torch_alloc(4096, -2, nullptr), nullptr);
  const std::string text = err.Text();
  EXPECT_NE(text.find("device -2 is not a CUDA ordinal"), std::string::npos) << text;
}

TEST(TorchAllocatorTest, ZeroBytesIsNullAndNoFailure) {
  StderrCapture err;
  EXPECT_EQ(gdrstore_torch_alloc(0, 0, nullptr), nullptr);
  gdrstore_torch_free(nullptr, 0, 0, nullptr);  // what PyTorch frees for it
  EXPECT_EQ(err.Text(), "");
}

TEST(TorchAllocatorTest, AFreeOfWhatAllocDidNotHandOutIsSaidAndLeftAlone) {
  StderrCapture err;
  gdrstore_torch_free(Bogus(0x7f0000201000), 4096, 0, Bogus(0x10));
  gdrstore_torch_free(Bogus(0x7f0000201000), 4096, 0, nullptr);
  gdrstore_torch_free(Bogus(1), 0, -1, nullptr);
  const std::string text = err.Text();
  EXPECT_EQ(Count(text, "gdrstore_torch_free(0x7f0000201000, 4096 bytes, device 0): not memory "
                        "gdrstore_torch_alloc handed out, or freed already; left alone"),
            2u)
      << text;
  EXPECT_EQ(Count(text, "gdrstore_torch_free(0x1, 0 bytes, device -1): not memory"), 1u) << text;
}

TEST(TorchAllocatorTest, OnAGpuTheMemoryIsAVmmDescriptorAndAFreeReleasesItOnce) {
  if (absl::Status s = gdr::cuda::DriverStatus(); !s.ok()) GTEST_SKIP() << s.message();
  void* p = gdrstore_torch_alloc(1, 0, nullptr);
  ASSERT_NE(p, nullptr);
  const uint64_t ptr = reinterpret_cast<uintptr_t>(p);
  absl::StatusOr<gdr::cuda::GpuExport> out = gdr::cuda::ExportAllocation(ptr);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->kind, gdr::cuda::GpuExport::Kind::kVmmFd);
  EXPECT_EQ(out->allocation_base, ptr);
  EXPECT_GE(out->allocation_size, 1u);
  EXPECT_EQ(out->ordinal, 0);
  gdrstore_torch_free(p, 1, 0, nullptr);
  EXPECT_FALSE(gdr::cuda::AllocationOf(ptr).ok()) << "the range is still mapped after the free";
  StderrCapture err;
  gdrstore_torch_free(p, 1, 0, nullptr);
  EXPECT_NE(err.Text().find("not memory gdrstore_torch_alloc handed out, or freed already"),
            std::string::npos);
}

}  // namespace
