#include "common/handoff/session_table.h"

#include <errno.h>
#include <sys/random.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gdr::handoff {

absl::Status FillRandom(void* out, size_t n) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t r = ::getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("getrandom: ", strerror(errno)));
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

bool ConstantTimeEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;  // the length is no secret (kKeyBytes)
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = diff | static_cast<uint8_t>(a[i] ^ b[i]);
  }
  return diff == 0;
}

absl::StatusOr<SessionInfo> SessionTable::Open(const PeerCredentials& peer, std::string name,
                                               std::array<uint8_t, kKeyBytes>* key) {
  State state;
  state.info.peer = peer;
  state.info.name = std::move(name);
  if (absl::Status s = FillRandom(state.key.data(), state.key.size()); !s.ok()) return s;
  *key = state.key;
  absl::MutexLock lock(&mu_);
  for (;;) {
    uint64_t id = 0;
    if (absl::Status s = FillRandom(&id, sizeof(id)); !s.ok()) return s;
    if (id == 0 || sessions_.contains(id)) continue;
    state.info.id = id;
    ++sessions_total_;
    SessionInfo info = state.info;
    sessions_.emplace(id, std::move(state));
    return info;
  }
}

size_t SessionTable::Close(uint64_t session) {
  // The regions' last references may unmap memory: drop them after the lock.
  absl::flat_hash_map<uint32_t, std::shared_ptr<const ImportedRegion>> gone;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session);
    if (it == sessions_.end()) return 0;
    regions_ -= it->second.regions.size();
    bytes_ -= it->second.bytes;
    gone = std::move(it->second.regions);
    sessions_.erase(it);
  }
  return gone.size();
}

absl::Status SessionTable::CheckLimits(const State& s, uint64_t size) const {
  const HandoffLimitNames& n = limits_.names;
  if (s.regions.size() >= limits_.regions_per_session) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("the session already has %u regions, its limit (%s=%u)",
                        s.regions.size(), n.max_regions_per_session, limits_.regions_per_session));
  }
  const uint64_t max_bytes = limits_.bytes_per_session;
  if (max_bytes != 0 && (size > max_bytes || s.bytes > max_bytes - size)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "registering %u more bytes would pass the session's limit of %u bytes (%s; %u "
        "registered now)",
        size, max_bytes, n.max_bytes_per_session, s.bytes));
  }
  if (regions_ >= limits_.regions) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "the server maps %u regions of all its clients, its limit (%s)", regions_,
        limits_.regions_name));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> SessionTable::Reserve(uint64_t session, uint64_t size) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return absl::NotFoundError("the session has ended");
  if (absl::Status s = CheckLimits(it->second, size); !s.ok()) return s;
  for (;;) {
    uint32_t rkey = 0;
    if (absl::Status s = FillRandom(&rkey, sizeof(rkey)); !s.ok()) return s;
    if (rkey != 0 && !it->second.regions.contains(rkey)) return rkey;
  }
}

absl::Status SessionTable::Add(uint64_t session, std::shared_ptr<const ImportedRegion> region) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return absl::NotFoundError("the session has ended");
  State& s = it->second;
  if (absl::Status st = CheckLimits(s, region->size()); !st.ok()) return st;
  if (s.regions.contains(region->rkey())) {
    return absl::AlreadyExistsError(
        absl::StrFormat("rkey 0x%08x is already registered in this session", region->rkey()));
  }
  s.bytes += region->size();
  bytes_ += region->size();
  ++regions_;
  s.regions.emplace(region->rkey(), std::move(region));
  return absl::OkStatus();
}

absl::Status SessionTable::Remove(uint64_t session, uint32_t rkey) {
  std::shared_ptr<const ImportedRegion> gone;  // unmapped after the lock, if last
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return absl::NotFoundError("the session has ended");
  State& s = it->second;
  auto r = s.regions.find(rkey);
  if (r == s.regions.end()) {
    return absl::NotFoundError(
        absl::StrFormat("rkey 0x%08x is not registered in this session", rkey));
  }
  gone = std::move(r->second);
  s.regions.erase(r);
  s.bytes -= gone->size();
  bytes_ -= gone->size();
  --regions_;
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ImportedRegion>> SessionTable::Resolve(
    uint64_t session, absl::string_view key, uint32_t rkey, uint64_t address, uint64_t length,
    bool need_write) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = sessions_.find(session);
  const absl::string_view want =
      it == sessions_.end()
          ? absl::string_view()
          : absl::string_view(reinterpret_cast<const char*>(it->second.key.data()), kKeyBytes);
  // An unknown session and a wrong key read the same, so a guess learns nothing.
  if (it == sessions_.end() || !ConstantTimeEqual(key, want)) {
    return absl::PermissionDeniedError(
        "no handoff session with this id and key (the session ended or the key is wrong)");
  }
  auto r = it->second.regions.find(rkey);
  if (r == it->second.regions.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rkey 0x%08x is not registered in handoff session %016x", rkey, session));
  }
  const ImportedRegion& region = *r->second;
  const uint64_t start = region.address();
  if (address < start || address - start > region.size() ||
      length > region.size() - (address - start)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "[0x%x, +%u) lies outside region rkey 0x%08x [0x%x, +%u)", address, length, rkey, start,
        region.size()));
  }
  if (need_write && !region.writable()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "region rkey 0x%08x was registered read-only: a get cannot write into it", rkey));
  }
  return r->second;
}

absl::StatusOr<SessionInfo> SessionTable::Session(uint64_t session) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) {
    return absl::NotFoundError(absl::StrFormat("handoff session %016x has ended", session));
  }
  return it->second.info;
}

HandoffStats SessionTable::stats() const {
  absl::ReaderMutexLock lock(&mu_);
  HandoffStats s;
  s.sessions = sessions_.size();
  s.regions = regions_;
  s.bytes = bytes_;
  s.sessions_total = sessions_total_;
  return s;
}

}  // namespace gdr::handoff
