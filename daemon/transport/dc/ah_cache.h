// A bounded LRU of address handles keyed by the remote port (GID/LID). DC needs an AH per work
// request; creating one is a system call, so hot destinations reuse theirs. Bounded because a
// daemon that serves many clients over months must not keep one AH per client it ever saw.
#pragma once

#include <cstdint>
#include <list>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/transport/dc/dc_device.h"

namespace gdr::dc {

class AhCache {
 public:
  // `device` must outlive the cache. `capacity` >= 1 entries.
  AhCache(DcDevice* device, AhSettings settings, size_t capacity);

  // The AH for `key`: the cached one (now most recently used), or a new one from the device,
  // inserted and evicting the least recently used entry when full. An evicted AH lives on
  // until its last holder lets go. The errno status of ibv_create_ah on failure (nothing is
  // cached then). Thread-safe. ibv_create_ah runs without the cache's lock (on RoCE it may
  // wait for neighbour resolution): while one key is being created, hits and other keys go
  // on; a second Get of the same key waits for that one creation and shares its result.
  absl::StatusOr<std::shared_ptr<AddressHandle>> Get(const AhKey& key);

  // Drops `key` (after a completion error that may mean a stale route); an AH of `key` being
  // created now is handed to its waiters but not cached. Thread-safe.
  void Invalidate(const AhKey& key);

  size_t size() const;
  size_t capacity() const { return capacity_; }
  uint64_t hits() const;    // served without a creation of their own (waiters included)
  uint64_t misses() const;  // creations started
  uint64_t evictions() const;
  // Gets now waiting for another Get's creation of their key (tests and diagnosis).
  uint32_t waiting() const;

 private:
  struct Entry {
    AhKey key;
    std::shared_ptr<AddressHandle> ah;
  };
  // One ibv_create_ah in flight; its creator and waiters share it.
  struct Creation {
    bool done = false;
    bool cache = true;  // false once Invalidate named the key during the creation
    absl::StatusOr<std::shared_ptr<AddressHandle>> result;
  };
  void InsertLocked(const AhKey& key, std::shared_ptr<AddressHandle> ah)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  DcDevice* const device_;
  const AhSettings settings_;
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // front = most recently used
  absl::flat_hash_map<AhKey, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  // Members of a Creation are guarded by mu_ as well.
  absl::flat_hash_map<AhKey, std::shared_ptr<Creation>> creating_ ABSL_GUARDED_BY(mu_);
  uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gdr::dc
