// A memfd a test maps and hands over as a client library would: sealed against shrinking
// (unless told not to, to see it refused), mapped read-write, unmapped and closed at the end.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace gdr::test {

struct TestMemfd {
  explicit TestMemfd(size_t n, bool seal = true) : size(n) {
    fd = ::memfd_create("gdr-test-memfd", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(n)), 0);
    if (seal) {
      EXPECT_EQ(::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    }
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    EXPECT_NE(p, MAP_FAILED);
    data = static_cast<std::byte*>(p);
  }
  ~TestMemfd() {
    ::munmap(data, size);
    ::close(fd);
  }
  TestMemfd(const TestMemfd&) = delete;
  TestMemfd& operator=(const TestMemfd&) = delete;
  uint64_t address() const { return reinterpret_cast<uint64_t>(data); }
  std::span<std::byte> span(size_t off, size_t n) { return {data + off, n}; }
  int fd = -1;
  size_t size = 0;
  std::byte* data = nullptr;
};

}  // namespace gdr::test
