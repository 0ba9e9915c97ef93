#include "client/src/registration.h"

namespace gdr {

void OpGate::Enter() {
  absl::MutexLock lock(&mu_);
  ++inflight_;
}

void OpGate::Leave() {
  absl::MutexLock lock(&mu_);
  --inflight_;
}

void OpGate::WaitIdle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](uint64_t* n) { return *n == 0; }, &inflight_));
}

std::shared_ptr<Registration> RegistrationCache::Find(uint64_t base, size_t n, bool gpu) {
  absl::MutexLock lock(&mu_);
  // Every registration starting at or below `base` may cover it; expired ones are dropped.
  for (auto it = by_base_.begin(); it != by_base_.end() && it->first <= base;) {
    std::shared_ptr<Registration> r = it->second.lock();
    if (r == nullptr) {
      it = by_base_.erase(it);
      continue;
    }
    const Region& region = *r->region();
    // Memory handed over with its handle (RegisterHandedOver) is that registration's alone.
    if (!region.handed_over && (region.gpu != nullptr) == gpu &&
        base - region.base <= region.size && n <= region.size - (base - region.base)) {
      ++hits_;
      return r;
    }
    ++it;
  }
  ++misses_;
  return nullptr;
}

void RegistrationCache::Add(const std::shared_ptr<Registration>& registration) {
  absl::MutexLock lock(&mu_);
  by_base_.emplace(registration->region()->base, registration);
}

bool RegistrationCache::Holds(const Registration& registration) const {
  absl::MutexLock lock(&mu_);
  auto [first, last] = by_base_.equal_range(registration.region()->base);
  for (auto it = first; it != last; ++it) {
    if (std::shared_ptr<Registration> r = it->second.lock(); r.get() == &registration) {
      return true;
    }
  }
  return false;
}

RegistrationCache::Stats RegistrationCache::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s;
  s.hits = hits_;
  s.misses = misses_;
  for (const auto& [base, weak] : by_base_) s.live += weak.expired() ? 0 : 1;
  return s;
}

}  // namespace gdr
