// GPU memory across processes (common/cuda/gpu_ipc.h). On a host without a driver, or in a build
// without CUDA, every entry point must say why (FAILED_PRECONDITION). On a GPU host a parent
// exports cuMemAlloc memory (a CUDA IPC handle) and VMM memory (a POSIX fd, inherited by the
// child) and a child process (this binary again, GpuIpcChild.*) imports each, checks the
// parent's bytes, writes its own, and the parent verifies them; interior pointers included.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/pattern.h"
#include "common/cuda/gpu.h"
#include "common/cuda/gpu_ipc.h"
#include "tests/integration/child_process.h"

namespace gdr::cuda {
namespace {

using ::testing::HasSubstr;

constexpr char kChildEnv[] = "GDR_GPU_IPC_CHILD";

#define REQUIRE_GPU()                                                             \
  do {                                                                            \
    absl::StatusOr<std::vector<GpuInfo>> gpus_ = ListGpus();                      \
    if (!gpus_.ok()) GTEST_SKIP() << "no GPU here: " << gpus_.status().message(); \
  } while (0)

std::string NoDriverText() { return BuiltWithCuda() ? "libcuda.so.1" : "no GPU support"; }

TEST(GpuIpc, WithoutADriverEveryCallSaysWhy) {
  if (DriverStatus().ok()) GTEST_SKIP() << "an NVIDIA driver is present; the GPU tests run";
  const std::string why = NoDriverText();
  auto expect = [&](const absl::Status& s, const char* what) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << what << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(why)) << what;
  };
  expect(ExportAllocation(0x7f0000000000).status(), "ExportAllocation");
  std::array<uint8_t, kIpcHandleBytes> handle{};
  expect(ImportedGpuMemory::OpenIpcHandle(handle, "0000:b7:00.0", 1 << 21).status(),
         "OpenIpcHandle");
  expect(ImportedGpuMemory::ImportVmmFd(0, "0000:b7:00.0", 1 << 21).status(), "ImportVmmFd");
  expect(ShareableGpuMemory::Create(0, 1 << 20).status(), "ShareableGpuMemory");
  std::vector<std::byte> host(4096);
  expect(PinnedHostRange::Create(host.data(), host.size()).status(), "PinnedHostRange");
}

// In-process: what each kind of allocation exports as, and the refusals.
TEST(GpuIpc, ExportsNameTheAllocationAndItsKind) {
  REQUIRE_GPU();
  const GpuInfo gpu = ListGpus()->at(0);
  auto legacy = DeviceMemory::Create(0, 3 << 20);
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  absl::StatusOr<GpuExport> e = ExportAllocation((*legacy)->ptr() + 4097);  // interior
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->kind, GpuExport::Kind::kIpcHandle);
  EXPECT_EQ(e->allocation_base, (*legacy)->ptr());
  EXPECT_EQ(e->allocation_size, size_t{4} << 20);  // 2 MiB granules
  EXPECT_EQ(e->pci, gpu.pci);
  EXPECT_EQ(e->ordinal, 0);
  EXPECT_TRUE(e->chunks.empty());

  auto vmm = ShareableGpuMemory::Create(0, 3 << 20);
  ASSERT_TRUE(vmm.ok()) << vmm.status();
  EXPECT_GE((*vmm)->size(), size_t{3} << 20);
  absl::StatusOr<GpuExport> v = ExportAllocation((*vmm)->ptr() + 12345);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->kind, GpuExport::Kind::kVmmFd);
  ASSERT_EQ(v->chunks.size(), 1u);
  EXPECT_TRUE(v->chunks[0].fd.valid());
  EXPECT_EQ(v->chunks[0].size, (*vmm)->size());
  EXPECT_EQ(v->allocation_base, (*vmm)->ptr());
  EXPECT_EQ(v->allocation_size, (*vmm)->size());
  EXPECT_EQ(v->pci, gpu.pci);

  std::vector<std::byte> host(4096);
  absl::StatusOr<GpuExport> h = ExportAllocation(reinterpret_cast<uint64_t>(host.data()));
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << h.status();
}

TEST(GpuIpc, HostileHandlesAreRefusedNotCrashedOn) {
  REQUIRE_GPU();
  const std::string pci = ListGpus()->at(0).pci;
  std::array<uint8_t, kIpcHandleBytes> junk;
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<uint8_t>(i * 37 + 11);
  absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> a =
      ImportedGpuMemory::OpenIpcHandle(junk, pci, 2 << 20);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << a.status();
  const int memfd = ::memfd_create("not-vmm", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(::ftruncate(memfd, 2 << 20), 0);
  absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> b =
      ImportedGpuMemory::ImportVmmFd(memfd, pci, 2 << 20);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << b.status();
  ::close(memfd);
  absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> c =
      ImportedGpuMemory::OpenIpcHandle(junk, "0000:ff:1f.7", 2 << 20);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound) << c.status();
  absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> d =
      ImportedGpuMemory::OpenIpcHandle(junk, "not-a-gpu", 2 << 20);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
}

TEST(GpuIpc, PinnedHostRangeLocksAndUnlocks) {
  REQUIRE_GPU();
  void* p = ::mmap(nullptr, 8 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  {
    auto pinned = PinnedHostRange::Create(p, 8 << 20);
    ASSERT_TRUE(pinned.ok()) << pinned.status();
    // Locking the same pages twice is the driver's refusal, named.
    auto again = PinnedHostRange::Create(p, 8 << 20);
    EXPECT_FALSE(again.ok());
  }
  auto after = PinnedHostRange::Create(p, 8 << 20);  // unlocked by the destructor
  EXPECT_TRUE(after.ok()) << after.status();
  after->reset();
  ::munmap(p, 8 << 20);
}

// What the child is told: "KIND;PCI;ALLOCATION_SIZE;OFFSET;LENGTH;HANDLE" with KIND ipc (HANDLE
// the IPC handle in hex) or vmm (HANDLE the number of the descriptor it was handed).
struct ChildSpec {
  std::string kind, pci, handle;
  uint64_t allocation_size = 0, offset = 0, length = 0;
};

std::string Encode(const ChildSpec& s) {
  return absl::StrCat(s.kind, ";", s.pci, ";", s.allocation_size, ";", s.offset, ";", s.length,
                      ";", s.handle);
}

// The child: imports, checks the parent's pattern at the offset, writes its own there.
TEST(GpuIpcChild, ImportCheckAndWrite) {
  const char* env = std::getenv(kChildEnv);
  if (env == nullptr) {
    GTEST_SKIP() << "runs only as the child process of GpuIpc.AChildImports* (" << kChildEnv
                 << " unset)";
  }
  std::vector<std::string> f = absl::StrSplit(env, ';');
  ASSERT_EQ(f.size(), 6u) << env;
  ChildSpec s{f[0], f[1], f[5]};
  ASSERT_TRUE(absl::SimpleAtoi(f[2], &s.allocation_size));
  ASSERT_TRUE(absl::SimpleAtoi(f[3], &s.offset));
  ASSERT_TRUE(absl::SimpleAtoi(f[4], &s.length));
  absl::StatusOr<std::unique_ptr<ImportedGpuMemory>> m;
  if (s.kind == "ipc") {
    const std::string raw = absl::HexStringToBytes(s.handle);
    ASSERT_EQ(raw.size(), kIpcHandleBytes);
    std::array<uint8_t, kIpcHandleBytes> h;
    std::memcpy(h.data(), raw.data(), h.size());
    m = ImportedGpuMemory::OpenIpcHandle(h, s.pci, s.allocation_size);
  } else {
    int fd = -1;
    ASSERT_TRUE(absl::SimpleAtoi(s.handle, &fd));
    m = ImportedGpuMemory::ImportVmmFd(fd, s.pci, s.allocation_size);
    ::close(fd);  // the mapping holds the memory now
  }
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->size(), s.allocation_size);
  // Page-aligned host memory, page-locked as the daemon locks its store pages.
  const size_t mapped = (s.length + 4095) / 4096 * 4096;
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::span<std::byte> buf(static_cast<std::byte*>(p), s.length);
  auto pinned = PinnedHostRange::Create(p, mapped);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  ASSERT_TRUE((*m)->CopyToHost(s.offset, buf.data(), buf.size()).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("parent"), s.offset, buf), std::nullopt);
  PatternFill(PatternSeed("child"), s.offset, buf);
  ASSERT_TRUE((*m)->CopyFromHost(s.offset, buf.data(), buf.size()).ok());
  EXPECT_EQ((*m)->CopyFromHost(s.allocation_size - 1, buf.data(), 2).code(),
            absl::StatusCode::kOutOfRange);
}

// Runs the child on `e` (exported from `ptr`, an interior pointer or not) over `length` bytes
// and verifies what it wrote through `parent_view`.
void RunChild(const GpuExport& e, uint64_t ptr, size_t length, const DeviceMemory& parent_view) {
  const uint64_t offset = ptr - e.allocation_base;
  std::vector<std::byte> buf(length);
  PatternFill(PatternSeed("parent"), offset, buf);
  ASSERT_TRUE(parent_view.CopyFromHost(offset, buf.data(), buf.size()).ok());
  ChildSpec s;
  s.pci = e.pci;
  s.allocation_size = e.allocation_size;
  s.offset = offset;
  s.length = length;
  if (e.kind == GpuExport::Kind::kIpcHandle) {
    s.kind = "ipc";
    s.handle = absl::BytesToHexString(absl::string_view(
        reinterpret_cast<const char*>(e.ipc_handle.data()), e.ipc_handle.size()));
  } else {
    s.kind = "vmm";
    s.handle = "3";  // SpawnWithEnv hands the descriptor over as the child's fd 3
  }
  auto dir = integ::TempDir::Create("gpu-ipc");
  ASSERT_TRUE(dir.ok()) << dir.status();
  char self[4096] = {};
  ASSERT_GT(::readlink("/proc/self/exe", self, sizeof(self) - 1), 0);
  auto child = integ::ChildProcess::SpawnWithEnv(
      {self, "--gtest_filter=GpuIpcChild.ImportCheckAndWrite"},
      {absl::StrCat(kChildEnv, "=", Encode(s))}, (*dir)->File("out"), (*dir)->File("err"),
      e.kind == GpuExport::Kind::kVmmFd ? e.chunks.at(0).fd.get() : -1);
  ASSERT_TRUE(child.ok()) << child.status();
  absl::StatusOr<int> ws = (*child)->Wait(absl::Seconds(120));
  ASSERT_TRUE(ws.ok()) << ws.status();
  ASSERT_EQ(integ::DescribeWaitStatus(*ws), "exited 0")
      << integ::ReadFileOrEmpty((*dir)->File("out"));
  std::fill(buf.begin(), buf.end(), std::byte{0});
  ASSERT_TRUE(parent_view.CopyToHost(offset, buf.data(), buf.size()).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("child"), offset, buf), std::nullopt)
      << "the child's bytes did not reach the parent's allocation (" << s.kind << ")";
}

TEST(GpuIpc, AChildImportsCuMemAllocByIpcHandle) {
  REQUIRE_GPU();
  auto mem = DeviceMemory::Create(0, 8 << 20);
  ASSERT_TRUE(mem.ok()) << mem.status();
  auto view = DeviceMemory::Borrow((*mem)->ptr(), 8 << 20);
  ASSERT_TRUE(view.ok()) << view.status();
  absl::StatusOr<GpuExport> e = ExportAllocation((*mem)->ptr());
  ASSERT_TRUE(e.ok()) << e.status();
  RunChild(*e, (*mem)->ptr(), 4 << 20, **view);
  // An interior pointer: the handle names the allocation, the offset the place.
  const uint64_t interior = (*mem)->ptr() + (1 << 20) + 123;
  absl::StatusOr<GpuExport> i = ExportAllocation(interior);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->allocation_base, (*mem)->ptr());
  RunChild(*i, interior, (2 << 20) + 7, **view);
}

TEST(GpuIpc, AChildImportsAVmmAllocationByDescriptor) {
  REQUIRE_GPU();
  auto mem = ShareableGpuMemory::Create(0, 8 << 20);
  ASSERT_TRUE(mem.ok()) << mem.status();
  auto view = DeviceMemory::Borrow((*mem)->ptr(), (*mem)->size());
  ASSERT_TRUE(view.ok()) << view.status();
  absl::StatusOr<GpuExport> e = ExportAllocation((*mem)->ptr());
  ASSERT_TRUE(e.ok()) << e.status();
  RunChild(*e, (*mem)->ptr(), 4 << 20, **view);
  const uint64_t interior = (*mem)->ptr() + (3 << 20) + 4095;
  absl::StatusOr<GpuExport> i = ExportAllocation(interior);
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(i->allocation_base, (*mem)->ptr());
  RunChild(*i, interior, (1 << 20) + 1, **view);
}

}  // namespace
}  // namespace gdr::cuda
