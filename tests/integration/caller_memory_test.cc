// Memory the caller owns, registered in place (Client::RegisterHostMemory) against a real
// gdrstored over tcp: bytes land in the caller's own memory and leave from it, the same range
// registered again is the same registration (no cost), a read-only mapping takes puts only,
// unmapped memory is refused naming the address, and destroying a Buffer waits for the ops in
// flight on it, so the caller may free the memory the moment the destructor returns.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"
#include "tests/integration/daemon_process.h"
#include "tests/integration/read_only_pages.h"

namespace gdr::integ {
namespace {

constexpr uint64_t kMiB = 1 << 20;

class CallerMemoryTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> flags) {
    auto d = DaemonProcess::Start(std::move(flags));
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    gdrstore::ClientOptions o;
    o.daemon_address = daemon_->address();
    auto c = gdrstore::Client::Connect(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }
  void SetUp() override { Start({"--volume", "vol0=64MiB"}); }
  void TearDown() override {
    client_.reset();
    if (daemon_) {
      auto st = daemon_->Terminate(absl::Seconds(30));
      ASSERT_TRUE(st.ok()) << st.status();
      EXPECT_EQ(DescribeWaitStatus(*st), "exited 0") << daemon_->Stderr();
    }
  }
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<gdrstore::Client> client_;
};

TEST_F(CallerMemoryTest, GetAndPutMoveBytesInPlaceAtAnyAlignment) {
  std::vector<std::byte> mine(4 * kMiB + 7);
  std::byte* p = mine.data() + 3;  // not page- nor word-aligned
  const size_t n = 4 * kMiB;
  auto buf = client_->RegisterHostMemory(p, n);
  ASSERT_TRUE(buf.ok()) << buf.status();
  EXPECT_EQ((*buf)->data(), p);
  EXPECT_EQ((*buf)->size(), n);
  EXPECT_EQ((*buf)->address(), reinterpret_cast<uint64_t>(p));
  EXPECT_TRUE((*buf)->writable());
  // get: store -> the caller's memory (wire Write).
  ASSERT_TRUE(client_->Write({"vol0", 12345, n}, **buf).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), 12345, std::span(p, n)), std::nullopt);
  // put: the caller's memory -> store (wire Read), then back into other memory of the caller.
  PatternFill(PatternSeed("vol0", 7), 0, std::span(p, n));
  ASSERT_TRUE(client_->Read({"vol0", 32 * kMiB, n}, **buf).ok());
  std::vector<std::byte> other(n);
  auto back = client_->RegisterHostMemory(other.data(), n);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(client_->Write({"vol0", 32 * kMiB, n}, **back).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0", 7), 0, std::span(other.data(), n)), std::nullopt);
}

TEST_F(CallerMemoryTest, TheSameOrAnInnerRangeReusesTheRegistration) {
  std::vector<std::byte> mine(1 * kMiB);
  auto first = client_->RegisterHostMemory(mine.data(), mine.size());
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = client_->RegisterHostMemory(mine.data(), mine.size());
  ASSERT_TRUE(again.ok()) << again.status();
  auto inner = client_->RegisterHostMemory(mine.data() + 4096, 100);
  ASSERT_TRUE(inner.ok()) << inner.status();
  EXPECT_EQ((*again)->rkey(), (*first)->rkey());
  EXPECT_EQ((*inner)->rkey(), (*first)->rkey());
  EXPECT_EQ((*inner)->address(), reinterpret_cast<uint64_t>(mine.data() + 4096));
  EXPECT_EQ((*inner)->size(), 100u);
  gdrstore::Client::RegistrationStats st = client_->registration_stats();
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.live, 1u);
  // The inner view moves bytes through the shared registration, within its own bounds only.
  ASSERT_TRUE(client_->Write({"vol0", 0, 100}, **inner).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), 0, std::span(mine.data() + 4096, 100)),
            std::nullopt);
  EXPECT_EQ(client_->Write({"vol0", 0, 101}, **inner).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Once every view is gone the registration is withdrawn; registering again makes a new one.
  first->reset();
  again->reset();
  inner->reset();
  EXPECT_EQ(client_->registration_stats().live, 0u);
  auto fresh = client_->RegisterHostMemory(mine.data(), mine.size());
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(client_->registration_stats().misses, 2u);
}

TEST_F(CallerMemoryTest, ARangeReachingPastARegistrationIsRegisteredOnItsOwn) {
  std::vector<std::byte> mine(64 * 1024);
  auto part = client_->RegisterHostMemory(mine.data() + 4096, 4096);
  ASSERT_TRUE(part.ok()) << part.status();
  auto whole = client_->RegisterHostMemory(mine.data(), mine.size());
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_NE((*whole)->rkey(), (*part)->rkey());
  EXPECT_EQ(client_->registration_stats().misses, 2u);
  // Both stay usable over the bytes they share.
  ASSERT_TRUE(client_->Write({"vol0", 0, mine.size()}, **whole).ok());
  ASSERT_TRUE(client_->Write({"vol0", 0, 4096}, **part).ok());
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), 0, std::span(mine.data() + 4096, 4096)),
            std::nullopt);
}

TEST_F(CallerMemoryTest, ReadOnlyMemoryTakesPutsOnly) {
  ReadOnlyPages ro(4, [](std::span<std::byte> s) { PatternFill(PatternSeed("vol0", 9), 0, s); });
  ASSERT_TRUE(ro.ok());
  auto buf = client_->RegisterHostMemory(ro.data(), ro.size());
  ASSERT_TRUE(buf.ok()) << buf.status();
  EXPECT_FALSE((*buf)->writable());
  ASSERT_TRUE(client_->Read({"vol0", 0, ro.size()}, **buf).ok());  // put
  absl::StatusOr<gdrstore::OpResult> get = client_->Write({"vol0", 0, ro.size()}, **buf);
  EXPECT_EQ(get.status().code(), absl::StatusCode::kPermissionDenied) << get.status();
}

TEST_F(CallerMemoryTest, UnmappedOrEmptyMemoryIsRefusedNamingTheAddress) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  // An address no mapping covers. Not a page this test frees: between munmap and the check
  // another thread (or ASan's runtime, in the sanitized build) may map the hole again. Pages
  // below vm.mmap_min_addr (64 KiB by default) are never handed out.
  void* p = reinterpret_cast<void*>(uintptr_t{0x1000});
  auto freed = client_->RegisterHostMemory(p, page);
  EXPECT_EQ(freed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(freed.status().message(), "not mapped")) << freed.status();
  EXPECT_TRUE(absl::StrContains(freed.status().message(),
                                absl::StrCat(absl::Hex(reinterpret_cast<uintptr_t>(p)))))
      << freed.status();
  std::vector<std::byte> mine(16);
  EXPECT_EQ(client_->RegisterHostMemory(nullptr, 16).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->RegisterHostMemory(mine.data(), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Device pointers need a CUDA driver to be recognised; where there is none (this CI machine),
// the refusal says so instead of guessing. On a GPU host gpu_data_path_test covers the rest.
TEST_F(CallerMemoryTest, GpuMemoryIsRecognisedFromThePointerOrRefusedSayingWhy) {
  std::vector<std::byte> host(4096);
  auto r = client_->RegisterGpuMemory(reinterpret_cast<uint64_t>(host.data()), host.size());
  ASSERT_FALSE(r.ok());
  // No driver: FAILED_PRECONDITION; a driver: host memory is not device memory.
  EXPECT_TRUE(r.status().code() == absl::StatusCode::kFailedPrecondition ||
              r.status().code() == absl::StatusCode::kInvalidArgument)
      << r.status();
}

// The volume's media model holds each op for 300 ms, so the op is surely in flight when the
// Buffer is destroyed; the destructor must not return before the op has been answered.
TEST(CallerMemoryDrainTest, DestroyingABufferWaitsForItsOpsInFlight) {
  auto d = DaemonProcess::Start({"--volume", "vol0=8MiB,latency_us=300000"});
  ASSERT_TRUE(d.ok()) << d.status();
  gdrstore::ClientOptions o;
  o.daemon_address = (*d)->address();
  auto c = gdrstore::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::byte> mine(64 * 1024);
  auto buf = (*c)->RegisterHostMemory(mine.data(), mine.size());
  ASSERT_TRUE(buf.ok()) << buf.status();
  std::atomic<bool> answered{false};
  absl::Status result;
  (*c)->SubmitAsync(gdrstore::OpKind::kWrite, {"vol0", 0, mine.size()}, **buf,
                    0, [&](absl::StatusOr<gdrstore::OpResult> r) {
                      result = r.status();
                      answered.store(true);
                    });
  buf->reset();
  // The destructor returned: the op's bytes are all in the memory (it waited for the transfer,
  // which finishes only after the simulated 300 ms). The callback itself may still be on its
  // way: the buffer lets go of an op before calling it, so a callback may destroy its buffer.
  EXPECT_EQ(PatternMismatch(PatternSeed("vol0"), 0, std::span(mine.data(), mine.size())),
            std::nullopt)
      << "the destructor returned with the op still in flight";
  ASSERT_TRUE(PollUntil([&] { return answered.load(); }, absl::Seconds(30)));
  EXPECT_TRUE(result.ok()) << result;
  c->reset();
  auto st = (*d)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(st.ok());
}

}  // namespace
}  // namespace gdr::integ
