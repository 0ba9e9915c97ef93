// Global admission control: bounds the ops and bytes in flight across the daemon. Lock-free;
// a refused op is answered RESOURCE_EXHAUSTED before any transport work starts.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"

namespace gdr {

class InflightLimiter {
 public:
  InflightLimiter(uint32_t max_ops, uint64_t max_bytes) : max_ops_(max_ops), max_bytes_(max_bytes) {}

  // New bounds for later TryAcquire calls (SIGHUP); permits already out are not revoked.
  void SetLimits(uint32_t max_ops, uint64_t max_bytes) {
    max_ops_.store(max_ops, std::memory_order_relaxed);
    max_bytes_.store(max_bytes, std::memory_order_relaxed);
  }

  // Move-only admission ticket; gives its op and bytes back when destroyed.
  class Permit {
   public:
    Permit() = default;
    Permit(Permit&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), bytes_(o.bytes_) {}
    Permit& operator=(Permit&& o) noexcept {
      Release();
      owner_ = std::exchange(o.owner_, nullptr);
      bytes_ = o.bytes_;
      return *this;
    }
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit() { Release(); }
    void Release() {
      if (owner_) owner_->Give(bytes_);
      owner_ = nullptr;
    }

   private:
    friend class InflightLimiter;
    Permit(InflightLimiter* owner, uint64_t bytes) : owner_(owner), bytes_(bytes) {}
    InflightLimiter* owner_ = nullptr;
    uint64_t bytes_ = 0;
  };

  // RESOURCE_EXHAUSTED naming the limit that is full. Thread-safe.
  absl::Status TryAcquire(uint64_t bytes, Permit* permit);

  uint32_t ops() const { return ops_.load(std::memory_order_relaxed); }
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  void Give(uint64_t bytes) {
    ops_.fetch_sub(1, std::memory_order_relaxed);
    bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  }
  std::atomic<uint32_t> max_ops_;
  std::atomic<uint64_t> max_bytes_;
  std::atomic<uint32_t> ops_{0};
  std::atomic<uint64_t> bytes_{0};
};

}  // namespace gdr
