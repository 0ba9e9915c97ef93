// The agent's clients: per handoff session, the regions it handed over (each with its
// registration at the upstream client), its ops in flight against the per-client limit, and
// its op counters for GetStats. A region leaves the table when its session ends or the handoff
// server lets it go (DEREGISTER), and lives on in the ops still using it: its registration is
// withdrawn and its memory unmapped when the last of them is done.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/handoff/handoff_server.h"
#include "agent/upstreams.h"
#include "common/handoff/imported_region.h"
#include "gdrstore/client.h"

namespace gdr::agent {

// A region as ops use it. Members go in reverse order: the upstream registration is withdrawn
// before the memory is unmapped.
struct MappedRegion {
  std::shared_ptr<handoff::ImportedRegion> region;
  std::unique_ptr<UpstreamMemory> memory;
};

// Op counters of one scope (a session, the whole agent). "write" = store -> client memory
// (the Write RPC), as on the wire.
struct OpCounts {
  uint64_t write_ops = 0, write_bytes = 0, read_ops = 0, read_bytes = 0;
  std::map<int, uint64_t> errors;  // by absl::StatusCode
  int64_t inflight_ops = 0, inflight_bytes = 0;
  void Fill(gdrstore::v1::OpCounters* out) const;
};

struct Session;

// An op admitted for a session; copyable (it rides in callbacks). Hand it to Finish once.
struct AdmittedOp {
  std::shared_ptr<const MappedRegion> mapped;
  std::shared_ptr<Session> session;
  bool write = false;
  uint64_t bytes = 0;
};

class ClientTable {
 public:
  explicit ClientTable(uint32_t max_ops_per_session) : max_ops_(max_ops_per_session) {}

  // The handoff server's on_register: keeps `region` with its upstream registration under its
  // rkey (replacing one the session held under the same rkey). Thread-safe.
  void Add(const handoff::SessionInfo& info, std::shared_ptr<handoff::ImportedRegion> region,
           std::unique_ptr<UpstreamMemory> memory);
  // The handoff server's on_session_end: the session's regions and counters go.
  void End(uint64_t session);
  // Drops the regions the handoff server has let go (a DEREGISTER): those that only this table
  // still holds. Ops in flight keep theirs.
  void Sweep();

  // Admits an op of `session` on `region` (what HandoffServer::Resolve returned):
  // RESOURCE_EXHAUSTED, not admitted (IsNotAdmitted), when the session has its
  // --max-ops-per-client in flight; UNAVAILABLE when the session ended meanwhile; INTERNAL when
  // the region has no upstream registration. Thread-safe, never blocks on I/O.
  absl::StatusOr<AdmittedOp> Begin(uint64_t session,
                                   const std::shared_ptr<const handoff::ImportedRegion>& region,
                                   bool write, uint64_t bytes);
  // The op's end: counted, its slot given back.
  void Finish(const AdmittedOp& op, const absl::Status& status);
  // An op refused before Begin (malformed, wrong key): the totals only.
  void CountRefused(absl::StatusCode code);

  // GetStats: the totals into `out` (total, transports), and into `agent` one entry per
  // session whose uid is `viewer` (every session when `see_all`; none without a viewer): a page
  // of them, those numbered above `after`, at most `max_entries` (0: all); when more follow,
  // out->next_page_after is the page's last session number in decimal.
  void Fill(gdrstore::v1::GetStatsResponse* out, gdrstore::v1::AgentStats* agent,
            std::optional<uid_t> viewer, bool see_all, uint64_t after = 0,
            uint32_t max_entries = 0) const;
  int64_t inflight() const { return inflight_.load(std::memory_order_relaxed); }
  uint32_t max_ops_per_session() const { return max_ops_; }

 private:
  std::shared_ptr<Session> Find(uint64_t session) const;

  const uint32_t max_ops_;
  std::atomic<int64_t> inflight_{0};
  mutable absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex total_mu_;
  OpCounts total_ ABSL_GUARDED_BY(total_mu_);
};

// One client session as the table keeps it.
struct Session {
  explicit Session(handoff::SessionInfo i) : info(std::move(i)) {}
  const handoff::SessionInfo info;
  std::atomic<uint32_t> inflight{0};
  mutable absl::Mutex mu;
  std::map<uint32_t, std::shared_ptr<const MappedRegion>> regions ABSL_GUARDED_BY(mu);
  uint64_t registered_bytes ABSL_GUARDED_BY(mu) = 0;
  OpCounts counts ABSL_GUARDED_BY(mu);
  bool ended ABSL_GUARDED_BY(mu) = false;  // its connection closed: it admits no op more
};

// "uid 1000 pid 4242 (name)": how logs, errors and GetStats name a client.
std::string DescribeClient(const handoff::SessionInfo& info);

}  // namespace gdr::agent
