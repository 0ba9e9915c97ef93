// Anonymous pages filled once and then mapped read-only, for tests of memory a caller
// registers that the daemon may read but never write. Unmapped on destruction.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <functional>
#include <span>

namespace gdr::integ {

class ReadOnlyPages {
 public:
  // `fill` writes the pages' contents before they become read-only. ok() is false when mmap
  // or mprotect failed.
  ReadOnlyPages(size_t pages, const std::function<void(std::span<std::byte>)>& fill)
      : size_(pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE))) {
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    data_ = static_cast<std::byte*>(p);
    fill(std::span(data_, size_));
    ok_ = ::mprotect(p, size_, PROT_READ) == 0;
  }
  ~ReadOnlyPages() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  ReadOnlyPages(const ReadOnlyPages&) = delete;
  ReadOnlyPages& operator=(const ReadOnlyPages&) = delete;

  bool ok() const { return ok_; }
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  size_t size_;
  std::byte* data_ = nullptr;
  bool ok_ = false;
};

}  // namespace gdr::integ
