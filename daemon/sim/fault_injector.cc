#include "daemon/sim/fault_injector.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_peer.h"
#include "common/wire/fault_spec.h"
#include "common/base/log.h"

namespace gdr {

namespace v1 = gdrstore::v1;

namespace {

// SplitMix64: spreads a daemon seed and a rule id into a rule's own seed.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool MatchesOps(v1::FaultOps ops, Direction direction) {
  if (ops == v1::FAULT_OPS_GET) return direction == Direction::kStoreToClient;
  if (ops == v1::FAULT_OPS_PUT) return direction == Direction::kClientToStore;
  return true;
}

// Whether an op on `transport` can carry the rule's kind at all.
bool KindFits(v1::FaultKind kind, Direction direction, TransportKind transport) {
  // A transport fault hits the ops of the transport its spelling names.
  if (const std::optional<TransportKind> only = BreakPathTransport(kind)) return *only == transport;
  switch (kind) {
    case v1::FAULT_CORRUPT: return direction == Direction::kStoreToClient;
    case v1::FAULT_RAIL_DOWN: return false;  // hit when set, never by an op
    default: return true;
  }
}

}  // namespace

absl::Time StallHold::until() const {
  absl::MutexLock lock(&mu_);
  return UntilLocked();
}

absl::Time StallHold::UntilLocked() const {
  absl::Time t = absl::InfinitePast();
  for (const auto& [rule, until] : rules_) t = std::max(t, until);
  return t;
}

void StallHold::Hold(uint64_t rule, absl::Time until) {
  absl::MutexLock lock(&mu_);
  rules_.emplace_back(rule, until);
}

void StallHold::Arm(DelayQueue* queue, absl::Time floor, std::function<void()> fn) {
  // Under the lock, so that a rule letting go meanwhile either is already out of UntilLocked
  // or finds the handle to advance.
  absl::MutexLock lock(&mu_);
  queue_ = queue;
  floor_ = floor;
  // The queued answer owns the hold: whoever armed it may let go of theirs at once (the
  // transport drops its completion callback once called), and a rule that goes must still
  // find the hold to bring the answer forward.
  handle_ = queue->RunAt(std::max(floor, UntilLocked()),
                         [self = shared_from_this(), fn = std::move(fn)] { fn(); });
}

void StallHold::Release(uint64_t rule) {
  absl::MutexLock lock(&mu_);
  std::erase_if(rules_, [rule](const auto& r) { return r.first == rule; });
  if (queue_ != nullptr) queue_->Advance(handle_, std::max(floor_, UntilLocked()));
}

FaultInjector::FaultInjector(uint64_t seed, std::function<absl::Time()> clock)
    : seed_(seed), clock_(std::move(clock)) {}

absl::StatusOr<v1::FaultState> FaultInjector::Add(const v1::FaultSpec& spec, std::string origin) {
  std::vector<std::string> log;
  absl::StatusOr<v1::FaultState> state;
  {
    absl::MutexLock lock(&mu_);
    state = AddLocked(spec, std::move(origin), &log);
  }
  for (const std::string& line : log) GDR_LOG(kWarning) << line;
  return state;
}

absl::StatusOr<v1::FaultState> FaultInjector::AddLocked(const v1::FaultSpec& spec,
                                                        std::string origin,
                                                        std::vector<std::string>* log) {
  if (absl::Status s = CheckFaultSpec(spec); !s.ok()) return s;
  const absl::Time now = clock_();
  Rule r;
  r.id = next_id_;
  r.hold_key = r.id;
  r.spec = spec;
  r.origin = std::move(origin);
  r.seed = spec.seed() != 0 ? spec.seed() : Mix(seed_ ^ Mix(r.id));
  r.rng.seed(r.seed);
  if (spec.for_ms() != 0) r.ends = now + absl::Milliseconds(spec.for_ms());
  if (spec.kind() == v1::FAULT_RAIL_DOWN) {
    if (!rail_down_) {
      return absl::FailedPreconditionError("rail-down: this daemon runs no RDMA rail");
    }
    if (absl::Status s = rail_down_(spec.rail(), absl::Milliseconds(spec.for_ms())); !s.ok()) {
      return s;
    }
    r.matched = 1;
    CountHitLocked(r, spec.rail());
    log->push_back(absl::StrCat("fault ", r.id, " (", FormatFaultSpec(spec), ", ", r.origin,
                                "): rail ", spec.rail(), " taken down for ",
                                absl::FormatDuration(absl::Milliseconds(spec.for_ms()))));
  } else {
    log->push_back(
        absl::StrCat("fault ", r.id, " set (", FormatFaultSpec(spec), ", ", r.origin, ")"));
  }
  ++next_id_;
  v1::FaultState state = StateLocked(r, now);
  rules_.push_back(std::move(r));
  active_.fetch_add(1);
  return state;
}

absl::Status FaultInjector::ReplaceConfigured(const std::vector<v1::FaultSpec>& specs) {
  for (const v1::FaultSpec& s : specs) {
    if (absl::Status st = CheckFaultSpec(s); !st.ok()) return st;
  }
  std::vector<std::string> log;
  absl::Status result;
  Released released;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> old_text, new_text;
    for (const Rule& r : rules_) {
      if (r.origin == "config") old_text.push_back(FormatFaultSpec(r.spec));
    }
    for (const v1::FaultSpec& s : specs) new_text.push_back(FormatFaultSpec(s));
    if (old_text == new_text) return absl::OkStatus();
    // The ops the old rules hold, by rule text: a new rule of the same text takes them over.
    std::multimap<std::string, std::pair<uint64_t, std::vector<std::weak_ptr<StallHold>>>> held;
    for (Rule& r : rules_) {
      if (r.origin != "config") continue;
      if (r.active) active_.fetch_sub(1);
      held.emplace(FormatFaultSpec(r.spec), std::make_pair(r.hold_key, std::move(r.holds)));
    }
    std::erase_if(rules_, [](const Rule& r) { return r.origin == "config"; });
    for (size_t i = 0; i < specs.size(); ++i) {
      absl::StatusOr<v1::FaultState> added = AddLocked(specs[i], "config", &log);
      if (!added.ok()) {
        if (result.ok()) result = added.status();
        continue;
      }
      auto it = held.find(new_text[i]);
      if (it == held.end()) continue;
      rules_.back().hold_key = it->second.first;
      rules_.back().holds = std::move(it->second.second);
      held.erase(it);
    }
    for (auto& [text, holds] : held) released.push_back(std::move(holds));
  }
  for (const std::string& line : log) GDR_LOG(kWarning) << line;
  Release(std::move(released));
  return result;
}

void FaultInjector::Release(Released released) {
  for (auto& [key, holds] : released) {
    for (const std::weak_ptr<StallHold>& w : holds) {
      if (std::shared_ptr<StallHold> h = w.lock()) h->Release(key);
    }
  }
}

absl::StatusOr<uint64_t> FaultInjector::Clear(const std::vector<uint64_t>& ids, bool all) {
  uint64_t cleared = 0;
  Released released;
  {
    absl::MutexLock lock(&mu_);
    for (uint64_t id : ids) {
      if (std::none_of(rules_.begin(), rules_.end(), [id](const Rule& r) { return r.id == id; })) {
        return absl::NotFoundError(absl::StrCat("no fault rule with id ", id));
      }
    }
    const auto gone = [&](const Rule& r) {
      return all || std::find(ids.begin(), ids.end(), r.id) != ids.end();
    };
    for (Rule& r : rules_) {
      if (!gone(r)) continue;
      ++cleared;
      if (r.active) active_.fetch_sub(1);
      if (!r.holds.empty()) released.emplace_back(r.hold_key, std::move(r.holds));
    }
    std::erase_if(rules_, gone);
  }
  if (cleared != 0) GDR_LOG(kWarning) << "faults cleared: " << cleared << " rule(s)";
  Release(std::move(released));
  return cleared;
}

v1::ListFaultsResponse FaultInjector::List() const {
  v1::ListFaultsResponse out;
  out.set_seed(seed_);
  const absl::Time now = clock_();
  absl::MutexLock lock(&mu_);
  for (const Rule& r : rules_) *out.add_faults() = StateLocked(r, now);
  return out;
}

v1::FaultState FaultInjector::StateLocked(const Rule& r, absl::Time now) const {
  v1::FaultState s;
  s.set_id(r.id);
  *s.mutable_spec() = r.spec;
  s.set_text(FormatFaultSpec(r.spec));
  s.set_matched(r.matched);
  s.set_hits(r.hits);
  s.set_origin(r.origin);
  s.set_seed(r.seed);
  // A rail-down rule matches no op but is active while its rail is held down.
  s.set_active(r.spec.kind() == v1::FAULT_RAIL_DOWN ? now < r.ends
                                                    : r.active && !Over(r, now));
  s.set_remaining_ms(r.ends == absl::InfiniteFuture()
                         ? -1
                         : std::max<int64_t>(0, absl::ToInt64Milliseconds(r.ends - now)));
  return s;
}

bool FaultInjector::Over(const Rule& r, absl::Time now) {
  return now >= r.ends || (r.spec.count() != 0 && r.hits >= r.spec.count()) ||
         r.spec.kind() == v1::FAULT_RAIL_DOWN;
}

bool FaultInjector::LiveLocked(Rule& r, absl::Time now) {
  if (!r.active) return false;
  const bool over = Over(r, now);
  if (over) {
    r.active = false;
    active_.fetch_sub(1);
  }
  return !over;
}

void FaultInjector::CountHitLocked(Rule& r, absl::string_view where) {
  ++r.hits;
  ++totals_[{FaultKindName(r.spec.kind()), std::string(where)}];
}

void FaultInjector::NoteLocked(std::string line, std::vector<std::string>* log) {
  const absl::Time now = clock_();
  if (now - log_second_ >= absl::Seconds(1)) {
    if (not_logged_ != 0) {
      log->push_back(absl::StrCat(not_logged_, " more fault hits were not logged (at most ",
                                  kLogPerSecond, " lines a second; all are counted)"));
    }
    log_second_ = now;
    logged_this_second_ = 0;
    not_logged_ = 0;
  }
  if (logged_this_second_ < kLogPerSecond) {
    ++logged_this_second_;
    log->push_back(std::move(line));
  } else {
    ++not_logged_;
  }
}

FaultDecision FaultInjector::Decide(absl::Time start, Direction direction,
                                    TransportKind transport, absl::string_view volume,
                                    uint64_t offset, uint64_t length, const FaultClient& client) {
  FaultDecision d;
  if (active_.load(std::memory_order_relaxed) == 0) return d;
  std::vector<std::string> log;
  {
    absl::MutexLock lock(&mu_);
    // The op's own start, not a reading of our own: a stall is measured from the instant the
    // op's service time is, so the daemon never reports less than the delay it held for.
    const absl::Time now = start;
    std::string host;  // the peer's address, computed once and only when a rule names a client
    for (Rule& r : rules_) {
      if (!LiveLocked(r, now)) continue;
      const v1::FaultSpec& s = r.spec;
      if (!s.volume().empty() && s.volume() != volume) continue;
      if (!MatchesOps(s.ops(), direction) || !KindFits(s.kind(), direction, transport)) continue;
      if (!s.client().empty() && s.client() != client.label) {
        if (host.empty()) host = GrpcPeerHost(client.peer);
        if (s.client() != host) continue;
      }
      ++r.matched;
      bool hit = true;
      if (s.rate() != 0) {
        hit = std::uniform_real_distribution<double>(0.0, 1.0)(r.rng) < s.rate();
      } else if (s.every() != 0) {
        hit = r.matched % s.every() == 0;
      }
      if (!hit) continue;
      CountHitLocked(r, volume);
      std::string what;
      switch (s.kind()) {
        case v1::FAULT_ERROR: {
          const auto code = static_cast<absl::StatusCode>(s.code() != 0 ? s.code() : 14);
          what = absl::StrCat("fails ", absl::StatusCodeToString(code));
          if (d.error.ok()) {
            d.error = absl::Status(code, absl::StrCat("injected fault ", r.id, " (",
                                                      FormatFaultSpec(s), ")"));
          }
          break;
        }
        case v1::FAULT_STALL: {
          const absl::Time until =
              s.delay_ms() != 0 ? now + absl::Milliseconds(s.delay_ms()) : r.ends;
          d.hold_until = std::max(d.hold_until, until);
          if (d.stall == nullptr) d.stall = std::make_shared<StallHold>();
          d.stall->Hold(r.hold_key, until);
          if (r.holds.size() >= r.prune_at) {
            std::erase_if(r.holds, [](const std::weak_ptr<StallHold>& w) { return w.expired(); });
            r.prune_at = std::max<size_t>(16, 2 * r.holds.size());
          }
          r.holds.push_back(d.stall);
          what = absl::StrCat("held ", absl::FormatDuration(until - now));
          break;
        }
        case v1::FAULT_CORRUPT:
          d.corrupt = r.rng();
          what = "delivers a flipped bit";
          break;
        default:
          // A transport fault: the op's transport breaks the path the op takes.
          if (BreakPathTransport(s.kind())) {
            d.transport = InjectedFault::kBreakPath;
            what = absl::StrCat("breaks its ", TransportName(transport), " path (",
                                FaultKindName(s.kind()), ")");
          }
          break;
      }
      NoteLocked(absl::StrCat("fault ", r.id, " hit: ",
                              direction == Direction::kStoreToClient ? "get " : "put ", volume,
                              " [", offset, ", +", length, ") from ",
                              client.label.empty() ? GrpcPeerHost(client.peer)
                                                   : std::string(client.label),
                              ": ", what, " (hit ", r.hits, ")"),
                 &log);
    }
  }
  for (const std::string& line : log) GDR_LOG(kWarning) << line;
  return d;
}

void FaultInjector::FillStats(v1::GetStatsResponse* out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [key, hits] : totals_) {
    v1::FaultStats* f = out->add_faults();
    f->set_kind(key.first);
    if (key.first == FaultKindName(v1::FAULT_RAIL_DOWN)) {
      f->set_rail(key.second);
    } else {
      f->set_volume(key.second);
    }
    f->set_hits(hits);
  }
}

}  // namespace gdr
