#include "daemon/transport/dc/ah_cache.h"

#include <algorithm>

namespace gdr::dc {

AhCache::AhCache(DcDevice* device, AhSettings settings, size_t capacity)
    : device_(device), settings_(settings), capacity_(std::max<size_t>(capacity, 1)) {}

absl::StatusOr<std::shared_ptr<AddressHandle>> AhCache::Get(const AhKey& key) {
  absl::MutexLock lock(&mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->ah;
  }
  ++misses_;
  // Created under the lock so that two first requests to one port make one AH, not two.
  absl::StatusOr<std::shared_ptr<AddressHandle>> ah = device_->CreateAh(key, settings_);
  if (!ah.ok()) return ah.status();
  lru_.push_front(Entry{key, *ah});
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().key);
    lru_.pop_back();  // the AH itself dies with its last in-flight holder
    ++evictions_;
  }
  return *ah;
}

void AhCache::Invalidate(const AhKey& key) {
  absl::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return;
  lru_.erase(it->second);
  index_.erase(it);
}

size_t AhCache::size() const {
  absl::MutexLock lock(&mu_);
  return lru_.size();
}
uint64_t AhCache::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}
uint64_t AhCache::misses() const {
  absl::MutexLock lock(&mu_);
  return misses_;
}
uint64_t AhCache::evictions() const {
  absl::MutexLock lock(&mu_);
  return evictions_;
}

}  // namespace gdr::dc
