// Memory registrations of one Client and the cache that hands the same one out again: a range
// that an existing registration covers costs nothing to register twice. A Buffer is a view of
// one registration; the registration is withdrawn from the transport when its last view goes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/src/transport/region.h"

namespace gdr {

// Ops in flight through one Buffer. Its destructor waits for them, so memory the caller owns is
// never released while the daemon may still be moving bytes in or out of it.
class OpGate {
 public:
  void Enter();
  void Leave();
  // Blocks until every op that entered has left.
  void WaitIdle();

 private:
  absl::Mutex mu_;
  uint64_t inflight_ ABSL_GUARDED_BY(mu_) = 0;
};

// One region registered with the transport; `withdraw` (may be empty) undoes that.
class Registration {
 public:
  Registration(std::shared_ptr<Region> region, std::function<void()> withdraw)
      : region_(std::move(region)), withdraw_(std::move(withdraw)) {}
  ~Registration() {
    if (withdraw_) withdraw_();
  }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  const std::shared_ptr<Region>& region() const { return region_; }

  // GPU memory: the GPU's PCI address and the RDMA device nearest it, found once when the
  // registration is made (looking them up costs more than a cache hit may).
  std::string gpu_pci;
  std::string rdma_device;

 private:
  std::shared_ptr<Region> region_;
  std::function<void()> withdraw_;
};

// The live registrations of a Client by address. Holds them weakly: a registration lives as
// long as a Buffer views it. Thread-safe.
class RegistrationCache {
 public:
  struct Stats {
    uint64_t hits = 0;    // registrations handed out again
    uint64_t misses = 0;  // registrations made
    size_t live = 0;
  };
  // A live registration of the same kind (host or GPU memory) that covers [base, base + n);
  // null when there is none (counted as a miss: the caller registers and Adds).
  std::shared_ptr<Registration> Find(uint64_t base, size_t n, bool gpu);
  void Add(const std::shared_ptr<Registration>& registration);
  // Whether `registration` was added here (and lives): a Buffer of this cache's Client(s).
  bool Holds(const Registration& registration) const;
  Stats stats() const;

 private:
  mutable absl::Mutex mu_;
  std::multimap<uint64_t, std::weak_ptr<Registration>> by_base_ ABSL_GUARDED_BY(mu_);
  uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gdr
