// The handoff server's sessions and their regions (common/handoff/handoff_server.h): ids and
// keys from the kernel's CSPRNG, per-session limits, and Resolve, the lookup every op makes.
// One reader-writer lock; nothing here does I/O or calls back, so Resolve never waits on a
// socket or a callback.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/handoff/handoff_server.h"
#include "common/handoff/imported_region.h"

namespace gdr::handoff {

// Fills `out` from getrandom(2); INTERNAL naming the errno when the kernel gives nothing.
absl::Status FillRandom(void* out, size_t n);

// True when a and b hold the same bytes; takes the same time wherever they differ.
bool ConstantTimeEqual(absl::string_view a, absl::string_view b);

// The limits REGISTER is held to, and what refusals call them.
struct SessionLimits {
  uint32_t regions_per_session = 4096;
  uint64_t bytes_per_session = 0;  // 0: unlimited
  uint64_t regions = UINT64_MAX;   // in all sessions
  std::string regions_name;        // "half of vm.max_map_count (65530)"
  HandoffLimitNames names;
};

class SessionTable {
 public:
  explicit SessionTable(SessionLimits limits) : limits_(std::move(limits)) {}

  // Opens a session for `peer`: a random nonzero id no open session has, and a random key.
  absl::StatusOr<SessionInfo> Open(const PeerCredentials& peer, std::string name,
                                   std::array<uint8_t, kKeyBytes>* key);
  // Ends a session: its regions leave the table now (memory stays mapped while ops hold it).
  // Returns the regions removed.
  size_t Close(uint64_t session);

  // Before importing a region of `size` bytes: RESOURCE_EXHAUSTED naming the limit it would
  // pass (by its setting, and its value), else a random nonzero rkey unused in the session.
  absl::StatusOr<uint32_t> Reserve(uint64_t session, uint64_t size) const;
  // Adds an imported region under its rkey (limits checked again).
  absl::Status Add(uint64_t session, std::shared_ptr<const ImportedRegion> region);
  // NOT_FOUND naming the rkey when the session has no such region.
  absl::Status Remove(uint64_t session, uint32_t rkey);

  // HandoffServer::Resolve's contract.
  absl::StatusOr<std::shared_ptr<const ImportedRegion>> Resolve(uint64_t session,
                                                                absl::string_view key,
                                                                uint32_t rkey, uint64_t address,
                                                                uint64_t length,
                                                                bool need_write) const;
  absl::StatusOr<SessionInfo> Session(uint64_t session) const;
  // sessions, regions, bytes and sessions_total (refused is the server's).
  HandoffStats stats() const;

 private:
  struct State {
    SessionInfo info;
    std::array<uint8_t, kKeyBytes> key{};
    absl::flat_hash_map<uint32_t, std::shared_ptr<const ImportedRegion>> regions;
    uint64_t bytes = 0;
  };
  absl::Status CheckLimits(const State& s, uint64_t size) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const SessionLimits limits_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, State> sessions_ ABSL_GUARDED_BY(mu_);
  uint64_t regions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t sessions_total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gdr::handoff
