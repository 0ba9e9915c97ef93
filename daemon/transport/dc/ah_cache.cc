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
  if (auto it = creating_.find(key); it != creating_.end()) {
    // Someone is creating this key's AH: wait for it (Await drops mu_ meanwhile) rather than
    // make a second AH to the same port.
    std::shared_ptr<Creation> c = it->second;
    ++hits_;
    ++waiting_;
    mu_.Await(absl::Condition(&c->done));
    --waiting_;
    return c->result;
  }
  ++misses_;
  auto c = std::make_shared<Creation>();
  creating_.emplace(key, c);
  // ibv_create_ah may block (RoCE neighbour resolution, up to about a second): never under
  // mu_, which every Submit takes.
  mu_.Unlock();
  absl::StatusOr<std::shared_ptr<AddressHandle>> ah = device_->CreateAh(key, settings_);
  mu_.Lock();
  creating_.erase(key);
  if (ah.ok() && c->cache) InsertLocked(key, *ah);
  c->result = ah;  // a failure is handed to the waiters and not cached
  c->done = true;
  return ah;
}

void AhCache::InsertLocked(const AhKey& key, std::shared_ptr<AddressHandle> ah) {
  if (auto it = index_.find(key); it != index_.end()) lru_.erase(it->second);
  lru_.push_front(Entry{key, std::move(ah)});
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().key);
    lru_.pop_back();  // the AH itself dies with its last in-flight holder
    ++evictions_;
  }
}

void AhCache::Invalidate(const AhKey& key) {
  absl::MutexLock lock(&mu_);
  if (auto c = creating_.find(key); c != creating_.end()) c->second->cache = false;
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
uint32_t AhCache::waiting() const {
  absl::MutexLock lock(&mu_);
  return waiting_;
}

}  // namespace gdr::dc
