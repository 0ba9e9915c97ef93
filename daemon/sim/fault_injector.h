// Fault injection: rules (gdrstore.v1.FaultSpec, from --fault / the config file or the Admin
// service) that make chosen ops fail, stall, deliver a corrupted byte, or fail their transport,
// and take rails down for a while. Choices are seeded: the same rules in the same order see
// the same sequence of ops and hit the same ones. Every hit is counted (per rule, and per kind
// and volume for GetStats) and logged (at most kLogPerSecond lines a second, then a count).
// A stall holds the ops it caught only while its rule is in place: clearing the rule (Admin
// ClearFaults, or SIGHUP dropping it from the configuration) lets them go.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/wire/transport_kind.h"
#include "daemon/sim/delay_queue.h"
#include "daemon/transport/transfer_op.h"
#include "gdrstore/v1/admin.pb.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

// The stall rules holding one op, shared by the op and the rules that caught it. A rule that
// goes lets go of its ops: they are then held only as long as their other rules say.
// Thread-safe.
class StallHold : public std::enable_shared_from_this<StallHold> {
 public:
  // The latest end among the rules still holding the op; InfinitePast when none is left.
  absl::Time until() const;
  // Queues `fn` (the op's answer) on `queue` for max(`floor`, until()); a rule letting go later
  // brings it forward to what is left. Call once, on a hold owned by a shared_ptr; the queued
  // answer keeps the hold alive (the rules know it only weakly). `fn` runs on the queue's
  // thread, or at once on
  // the caller's (with this hold's lock held: `fn` must not touch the hold) once the queue has
  // shut down.
  void Arm(DelayQueue* queue, absl::Time floor, std::function<void()> fn);

 private:
  friend class FaultInjector;
  void Hold(uint64_t rule, absl::Time until);
  void Release(uint64_t rule);
  absl::Time UntilLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  // (the holding rule's hold key, the end of its hold); a handful at most.
  std::vector<std::pair<uint64_t, absl::Time>> rules_ ABSL_GUARDED_BY(mu_);
  DelayQueue* queue_ ABSL_GUARDED_BY(mu_) = nullptr;  // set by Arm
  DelayQueue::Handle handle_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time floor_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// What the rules decided for one op.
struct FaultDecision {
  absl::Status error;                           // not OK: fail the op with it, start nothing
  // stall: answer no earlier than this, measured from the op's start (Decide's `start`)...
  absl::Time hold_until = absl::InfinitePast();
  // ...for as long as the rules that decided it are in place (null when no stall hit).
  std::shared_ptr<StallHold> stall;
  std::optional<uint64_t> corrupt;              // corrupt: random bits picking byte and bit
  InjectedFault transport = InjectedFault::kNone;
};

// Who sent an op, as rules match it.
struct FaultClient {
  absl::string_view label;  // the token-file label; empty without tokens
  absl::string_view peer;   // gRPC peer text ("ipv4:127.0.0.1:4242")
};

class FaultInjector {
 public:
  static constexpr int kLogPerSecond = 20;
  // Takes a rail out of service for a while; NOT_FOUND naming the rails when there is none
  // by that name.
  using RailDown = std::function<absl::Status(const std::string& rail, absl::Duration)>;

  // `seed`: the daemon's --fault-seed; `clock` stands in for absl::Now in unit tests (when a
  // rule's window starts, what List reports, the log); an op is judged at the start it brings.
  explicit FaultInjector(uint64_t seed, std::function<absl::Time()> clock = absl::Now);

  // Where rail-down rules go; unset, they are refused (FAILED_PRECONDITION: no rails). Before
  // any rule is added.
  void set_rail_down(RailDown fn) { rail_down_ = std::move(fn); }

  // Adds a rule (checked as CheckFaultSpec does; INVALID_ARGUMENT naming the field). `origin`:
  // "config" or "admin <label>". Rail-down takes its rail down now.
  absl::StatusOr<gdrstore::v1::FaultState> Add(const gdrstore::v1::FaultSpec& spec,
                                               std::string origin);
  // The rules of the configuration (origin "config"), e.g. after SIGHUP: when they differ from
  // those in place, the old ones are removed and these added (their counts start again). The
  // rules added through the Admin service stay. Checks every spec before changing anything.
  // Ops held by a stall rule that is no longer configured are let go; a rule of the same text
  // as one before keeps holding its predecessor's.
  absl::Status ReplaceConfigured(const std::vector<gdrstore::v1::FaultSpec>& specs);
  // Removes the rules named (NOT_FOUND naming the first unknown id; nothing removed then), or
  // every rule, and lets go of the ops their stalls hold. Returns how many rules went.
  absl::StatusOr<uint64_t> Clear(const std::vector<uint64_t>& ids, bool all);
  gdrstore::v1::ListFaultsResponse List() const;

  // The decision for one validated op that started at `start` (the instant its service time is
  // measured from): rules are judged at that instant and a stall holds until `start` plus its
  // delay. Lock-free when no rule is active.
  FaultDecision Decide(absl::Time start, Direction direction, TransportKind transport,
                       absl::string_view volume, uint64_t offset, uint64_t length,
                       const FaultClient& client);
  // GetStatsResponse.faults: hits per kind and volume since start.
  void FillStats(gdrstore::v1::GetStatsResponse* out) const;
  uint64_t seed() const { return seed_; }

 private:
  struct Rule {
    uint64_t id = 0;
    gdrstore::v1::FaultSpec spec;
    std::string origin;
    uint64_t seed = 0;
    std::mt19937_64 rng;
    absl::Time ends = absl::InfiniteFuture();
    uint64_t matched = 0;
    uint64_t hits = 0;
    bool active = true;
    // What the ops a stall caught know this rule by: its id, or that of the configured rule of
    // the same text it replaced on SIGHUP (which handed it its holds).
    uint64_t hold_key = 0;
    std::vector<std::weak_ptr<StallHold>> holds;  // ops it caught; the answered ones expire
    size_t prune_at = 16;  // holds.size() at which the expired ones are dropped
  };
  using Released = std::vector<std::pair<uint64_t, std::vector<std::weak_ptr<StallHold>>>>;
  // Lets go of every op a removed rule held; called without mu_.
  static void Release(Released released);
  absl::StatusOr<gdrstore::v1::FaultState> AddLocked(const gdrstore::v1::FaultSpec& spec,
                                                     std::string origin,
                                                     std::vector<std::string>* log)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  gdrstore::v1::FaultState StateLocked(const Rule& r, absl::Time now) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Whether the rule takes no more ops at `now`: its window or count is over, or it is a
  // rail-down (hit once, when set).
  static bool Over(const Rule& r, absl::Time now);
  // Whether the rule is still active at `now` (ends it when its window or count is over).
  bool LiveLocked(Rule& r, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountHitLocked(Rule& r, absl::string_view where) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lines to log for hits, kept to kLogPerSecond a second; called with mu_ held, logged after.
  void NoteLocked(std::string line, std::vector<std::string>* log)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t seed_;
  const std::function<absl::Time()> clock_;
  RailDown rail_down_;
  std::atomic<int> active_{0};  // rules with active = true
  mutable absl::Mutex mu_;
  std::vector<Rule> rules_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // (kind, volume or rail) -> hits, for as long as the daemon runs.
  std::map<std::pair<std::string, std::string>, uint64_t> totals_ ABSL_GUARDED_BY(mu_);
  absl::Time log_second_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int logged_this_second_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t not_logged_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gdr
