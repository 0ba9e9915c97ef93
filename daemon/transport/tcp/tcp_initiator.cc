#include "daemon/transport/tcp/tcp_initiator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/base/ip_address.h"
#include "common/base/status_macros.h"
#include "common/wire/tcp_proof.h"
#include "common/base/thread_name.h"
#include "common/base/units.h"

namespace gdr {
namespace {

// The op's tcp destination; Submit and SubmitBatch let no op without one in.
const TcpDestination& Dest(const TransferOp& op) { return *DestinationOf<TcpDestination>(op); }

absl::Status NotTcp() {
  return absl::InternalError("tcp initiator got an op of another transport");
}

// The pool key of an op's links. The secret goes in as its SHA-256 digest: map lookups compare
// keys byte by byte, and comparing the secret itself would tell a guesser, by timing, how much
// of a live link's secret it got right.
std::string PoolKey(const TransferOp& op) {
  const tcpwire::Digest d = tcpwire::SecretDigest(Dest(op).secret);
  return absl::StrCat(Dest(op).Key(), "|", TcpTargetRule::CallerClass(op.caller), "|",
                      absl::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpInitiator>> TcpInitiator::Create(TcpInitiatorOptions options) {
  if (options.max_links == 0) return absl::InvalidArgumentError("max_links must be >= 1");
  if (options.links_per_target == 0) {
    return absl::InvalidArgumentError("links_per_target must be >= 1");
  }
  if (options.chunk_bytes < 4096 || options.chunk_bytes > tcpwire::kMaxPayload) {
    return absl::InvalidArgumentError(absl::StrCat("chunk size ", options.chunk_bytes,
                                                   " must be in 4096..", tcpwire::kMaxPayload));
  }
  options.link.max_chunk_bytes = static_cast<uint32_t>(options.chunk_bytes);
  return std::unique_ptr<TcpInitiator>(new TcpInitiator(options));
}

TcpInitiator::TcpInitiator(TcpInitiatorOptions options)
    : options_(options), rule_(std::make_shared<const TcpTargetRule>(options.target_allow)) {
  housekeeping_ns_.store(absl::GetCurrentTimeNanos());
  housekeeper_ = std::thread([this] {
    SetThreadName("gdr-tcp-house");
    Housekeeping();
  });
}

TcpInitiator::~TcpInitiator() { Shutdown(); }

void TcpInitiator::Shutdown() {
  std::vector<std::shared_ptr<TcpLink>> all;
  std::vector<OpDone> waiting;
  {
    absl::MutexLock lock(&mu_);
    if (!shutdown_) {
      shutdown_ = true;
      stop_.Notify();
    }
    for (auto& [key, vec] : links_)
      for (auto& l : vec) all.push_back(std::move(l));
    links_.clear();
    for (auto& l : retiring_) all.push_back(std::move(l));
    retiring_.clear();
    total_links_ = 0;
    for (auto& l : graveyard_) all.push_back(std::move(l));
    graveyard_.clear();
    for (auto& [key, queue] : waiting_)
      for (Waiter& w : queue) waiting.push_back(std::move(w.done));
    waiting_.clear();
    wait_order_.clear();
    waiting_ops_ = 0;
  }
  for (OpDone& done : waiting) done(absl::CancelledError("daemon is shutting down"));
  for (auto& l : all) l->Fail(absl::CancelledError("daemon is shutting down"));
  all.clear();  // joins link threads
  if (housekeeper_.joinable() && housekeeper_.get_id() != std::this_thread::get_id()) {
    housekeeper_.join();
  }
}

absl::Status TcpInitiator::CheckHealth(absl::Duration max_stall) const {
  if (stop_.HasBeenNotified()) return absl::UnavailableError("tcp initiator is shut down");
  const absl::Duration age =
      absl::Nanoseconds(absl::GetCurrentTimeNanos() - housekeeping_ns_.load());
  if (age > max_stall) {
    return absl::UnavailableError(absl::StrCat(
        "tcp housekeeping/completion thread has not come round for ", absl::FormatDuration(age),
        " (stuck in a completion?)"));
  }
  // Each link's receiver is the completion poller of its connection: one that has sat in a
  // single op's completion callback this long is stuck, whatever the network does. (If the
  // lock itself were wedged, this probe blocks and the pings stop all the same.)
  absl::MutexLock lock(&mu_);
  for (const auto& [key, vec] : links_) {
    for (const auto& l : vec) {
      const absl::Duration busy = l->completion_busy_for();
      if (busy > max_stall) {
        return absl::UnavailableError(absl::StrCat(
            "tcp completion thread of the link to ", l->destination().Key(),
            " has been inside one op completion for ",
            absl::FormatDuration(busy)));
      }
    }
  }
  return absl::OkStatus();
}

InitiatorStats TcpInitiator::stats() const {
  InitiatorStats s;
  s.capacity = options_.max_links;
  s.in_flight = ops_in_flight_.load(std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  s.in_use = total_links_;
  s.clients = static_cast<uint32_t>(links_.size());
  s.errors = link_errors_;
  s.waiting = waiting_ops_;
  s.handovers = handovers_;
  return s;
}

std::string TcpInitiator::Describe() const {
  return absl::StrCat("software one-sided emulation over TCP; up to ", options_.max_links,
                      " links (", options_.links_per_target,
                      " per client; beyond that, turns of ", absl::FormatDuration(options_.turn),
                      "), chunks of ",
                      FormatSize(options_.chunk_bytes), "; ", rule_->Describe(),
                      ", each proving the caller's secret");
}

void TcpInitiator::BuryLocked(std::shared_ptr<TcpLink> link) {
  if (!absl::IsCancelled(link->error())) ++link_errors_;
  graveyard_.push_back(std::move(link));
  --total_links_;
}

void TcpInitiator::ReapDeadLocked() {
  for (auto it = links_.begin(); it != links_.end();) {
    auto& vec = it->second;
    for (auto l = vec.begin(); l != vec.end();) {
      if ((*l)->dead()) {
        BuryLocked(std::move(*l));
        l = vec.erase(l);
      } else {
        ++l;
      }
    }
    it = vec.empty() ? links_.erase(it) : std::next(it);
  }
  // A retired link normally leaves through OnDrained; one that died with nothing outstanding
  // never calls it.
  for (auto l = retiring_.begin(); l != retiring_.end();) {
    if ((*l)->dead() && (*l)->outstanding_chunks() == 0) {
      BuryLocked(std::move(*l));
      l = retiring_.erase(l);
    } else {
      ++l;
    }
  }
}

size_t TcpInitiator::Plan::IndexOf(const std::shared_ptr<TcpLink>& link) {
  for (size_t i = 0; i < links.size(); ++i)
    if (links[i] == link) return i;
  links.push_back(link);
  chunks.emplace_back();
  bytes.push_back(0);
  return links.size() - 1;
}

std::shared_ptr<TcpLink> TcpInitiator::NewLinkLocked(const TransferOp& op,
                                                     const std::string& key) {
  auto link = std::make_shared<TcpLink>(Dest(op), op.caller, rule_, options_.link);
  links_[key].push_back(link);
  ++total_links_;
  return link;
}

bool TcpInitiator::EvictIdleLocked(const std::string& key, const Plan& plan, absl::Time now) {
  std::vector<std::shared_ptr<TcpLink>>* victim_vec = nullptr;
  size_t victim = 0;
  absl::Time oldest = absl::InfiniteFuture();
  for (auto& [k, vec] : links_) {
    if (k == key) continue;
    for (size_t i = 0; i < vec.size(); ++i) {
      const auto& l = vec[i];
      // A link inside its turn is not taken even when idle for a moment between two ops:
      // taking it would only make its destination take another's, and so on (thrashing).
      if (l->outstanding_chunks() != 0 || now - l->opened_at() < options_.turn) continue;
      if (std::find(plan.links.begin(), plan.links.end(), l) != plan.links.end()) continue;
      const absl::Time t = l->last_activity();
      if (t < oldest) {
        oldest = t;
        victim_vec = &vec;
        victim = i;
      }
    }
  }
  if (victim_vec == nullptr) return false;
  std::shared_ptr<TcpLink> l = std::move((*victim_vec)[victim]);
  victim_vec->erase(victim_vec->begin() + static_cast<ptrdiff_t>(victim));
  HandedOverLocked(std::move(l));
  std::erase_if(links_, [](const auto& kv) { return kv.second.empty(); });
  return true;
}

absl::Status TcpInitiator::PlanLocked(const TransferOp& op, OpDone& done, Plan& plan) {
  const uint64_t chunk = options_.chunk_bytes;
  const uint64_t nchunks = (op.length + chunk - 1) / chunk;
  const auto opcode = op.direction == Direction::kStoreToClient ? tcpwire::Opcode::kWriteReq
                                                                : tcpwire::Opcode::kReadReq;
  // An address literal is judged here, so a refused target costs no link, thread or socket.
  if (absl::StatusOr<IpAddress> ip = IpAddress::Parse(Dest(op).host); ip.ok()) {
    GDR_RETURN_IF_ERROR(rule_->Check(op.caller, Dest(op).Key(), *ip));
  }
  const std::string key = PoolKey(op);
  auto wait = [&] {
    auto [it, first] = waiting_.try_emplace(key);
    if (first) wait_order_.push_back(key);
    it->second.push_back(Waiter{op, std::move(done), absl::Now()});
    ++waiting_ops_;
    return absl::OkStatus();
  };
  // Behind its own earlier ops; and behind every waiting destination (first come, first served).
  if (waiting_.contains(key)) return wait();
  auto found = links_.find(key);
  if (found != links_.end()) {
    std::erase_if(found->second, [this](const std::shared_ptr<TcpLink>& l) {
      if (!l->dead()) return false;
      BuryLocked(l);
      return true;
    });
    if (found->second.empty()) links_.erase(found);
  }
  if (!links_.contains(key)) {
    if (!wait_order_.empty()) return wait();
    if (total_links_ >= options_.max_links && !EvictIdleLocked(key, plan, absl::Now())) {
      return wait();
    }
    NewLinkLocked(op, key);
  }
  auto& existing = links_[key];
  // This destination's links as indices into `plan`, with their load (enqueued + planned).
  std::vector<size_t> mine;
  std::vector<uint64_t> load;
  for (auto& l : existing) {
    const size_t idx = plan.IndexOf(l);
    mine.push_back(idx);
    load.push_back(l->outstanding_bytes() + plan.bytes[idx]);
  }
  auto state = std::make_shared<OpState>(static_cast<uint32_t>(nchunks), std::move(done),
                                         &ops_in_flight_);
  for (uint64_t i = 0; i < nchunks; ++i) {
    // The first link with room for a chunk: small ops keep to one link (one thread pair, one
    // burst of answers) however many links bulk transfers opened earlier.
    size_t best = load.size();
    for (size_t j = 0; j < load.size(); ++j) {
      if (load[j] < chunk) {
        best = j;
        break;
      }
    }
    if (best == load.size()) {
      best = 0;
      for (size_t j = 1; j < load.size(); ++j)
        if (load[j] < load[best]) best = j;
      // Every link carries a full chunk: open another, while nobody waits for one.
      if (mine.size() < options_.links_per_target && wait_order_.empty() &&
          total_links_ < options_.max_links) {
        mine.push_back(plan.IndexOf(NewLinkLocked(op, key)));
        load.push_back(0);
        best = mine.size() - 1;
      }
    }
    Chunk c;
    c.opcode = opcode;
    c.local = op.local + i * chunk;
    c.length = static_cast<uint32_t>(std::min(chunk, op.length - i * chunk));
    c.remote_address = op.remote_address + i * chunk;
    c.rkey = op.rkey;
    c.op = state;
    load[best] += c.length;
    plan.bytes[mine[best]] += c.length;
    plan.chunks[mine[best]].push_back(std::move(c));
    // An injected path fault: a tcp op's path is its links; the first chunk's is closed.
    if (i == 0 && op.inject == InjectedFault::kBreakPath) {
      plan.dropped.push_back(plan.links[mine[best]]);
    }
  }
  return absl::OkStatus();
}

void TcpInitiator::HandedOverLocked(std::shared_ptr<TcpLink> link) {
  // Nothing outstanding (or already failed): Fail runs no callback, so it is safe under mu_.
  link->Fail(absl::CancelledError("link handed over to a waiting destination"));
  BuryLocked(std::move(link));
  ++handovers_;
}

void TcpInitiator::HandOverLocked(Plan& plan) {
  while (!wait_order_.empty() && total_links_ < options_.max_links) {
    auto node = waiting_.extract(wait_order_.front());
    wait_order_.pop_front();
    std::deque<Waiter>& queue = node.mapped();
    waiting_ops_ -= queue.size();
    NewLinkLocked(queue.front().op, node.key());
    for (Waiter& w : queue) {
      if (absl::Status s = PlanLocked(w.op, w.done, plan); !s.ok()) {
        plan.failed.emplace_back(std::move(w.done), std::move(s));
      }
    }
  }
}

void TcpInitiator::ScheduleLocked(absl::Time now, Plan& plan) {
  HandOverLocked(plan);
  // Links retire a few at a time: retiring every link whose turn is over at once would stall
  // the whole pool while they drain and reconnect together, turn after turn.
  const size_t most_retiring =
      std::min<size_t>(wait_order_.size(), std::max<uint32_t>(1, options_.max_links / 8));
  if (retiring_.size() >= most_retiring) return;
  // Candidates: links past their turn, not carrying chunks planned by this very call. A
  // destination's extra links go first, then the longest-serving.
  struct Candidate {
    std::string key;
    std::shared_ptr<TcpLink> link;
    bool extra;
  };
  std::vector<Candidate> candidates;
  for (auto& [key, vec] : links_) {
    for (auto& l : vec) {
      if (now - l->opened_at() < options_.turn) continue;
      if (std::find(plan.links.begin(), plan.links.end(), l) != plan.links.end()) continue;
      candidates.push_back({key, l, vec.size() > 1});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.extra != b.extra) return a.extra;
    return a.link->opened_at() < b.link->opened_at();
  });
  for (Candidate& c : candidates) {
    if (retiring_.size() >= most_retiring) break;
    auto it = links_.find(c.key);
    if (it == links_.end()) continue;
    auto& vec = it->second;
    auto pos = std::find(vec.begin(), vec.end(), c.link);
    if (pos == vec.end()) continue;
    vec.erase(pos);
    if (vec.empty()) links_.erase(it);
    TcpLink* raw = c.link.get();
    if (c.link->Retire([this, raw] { OnDrained(raw); })) {
      HandedOverLocked(std::move(c.link));
      HandOverLocked(plan);
    } else {
      retiring_.push_back(std::move(c.link));
    }
  }
}

void TcpInitiator::OnDrained(TcpLink* raw) {
  Plan plan;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    auto it = std::find_if(retiring_.begin(), retiring_.end(),
                           [raw](const std::shared_ptr<TcpLink>& l) { return l.get() == raw; });
    if (it == retiring_.end()) return;
    std::shared_ptr<TcpLink> link = std::move(*it);
    retiring_.erase(it);
    // The graveyard keeps the last reference: this may be the link's own receiver thread,
    // which must not be the one to join it.
    HandedOverLocked(std::move(link));
    ScheduleLocked(absl::Now(), plan);
    EnqueueLocked(plan);
  }
  Finish(plan);
}

void TcpInitiator::EnqueueLocked(Plan& plan) {
  for (size_t i = 0; i < plan.links.size(); ++i) {
    if (plan.chunks[i].empty()) continue;
    if (plan.links[i]->Enqueue(std::move(plan.chunks[i]))) plan.claimed.push_back(plan.links[i]);
  }
}

void TcpInitiator::Finish(Plan& plan) {
  // Before sending, so the op's chunks are certain to fail with the link, as in a link lost
  // with them queued.
  for (auto& l : plan.dropped) {
    l->Fail(absl::UnavailableError(absl::StrCat("tcp link to ", l->destination().Key(),
                                                " dropped by an injected fault")));
  }
  for (auto& l : plan.claimed) l->SendClaimed();
  for (auto& [done, status] : plan.failed) done(std::move(status));
}

absl::Status TcpInitiator::Submit(const TransferOp& op, OpDone done) {
  if (DestinationOf<TcpDestination>(op) == nullptr) return NotTcp();
  Plan plan;
  absl::Status s;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::CancelledError("daemon is shutting down");
    const size_t waiting_before = wait_order_.size();
    s = PlanLocked(op, done, plan);
    // Only a destination that started waiting now can change what is due; turns that end are
    // the housekeeper's (a scan of every link on every op would serialise the pool).
    if (wait_order_.size() > waiting_before) ScheduleLocked(absl::Now(), plan);
    // Enqueued under mu_, so housekeeping never sees a planned link as idle; sent after it.
    EnqueueLocked(plan);
  }
  Finish(plan);
  return s;
}

void TcpInitiator::SubmitBatch(std::span<Submission> batch) {
  Plan plan;
  {
    absl::MutexLock lock(&mu_);
    const size_t waiting_before = wait_order_.size();
    for (Submission& s : batch) {
      s.status = shutdown_ ? absl::CancelledError("daemon is shutting down")
                 : DestinationOf<TcpDestination>(s.op) == nullptr ? NotTcp()
                                                                  : PlanLocked(s.op, s.done, plan);
    }
    if (wait_order_.size() > waiting_before) ScheduleLocked(absl::Now(), plan);
    EnqueueLocked(plan);
  }
  Finish(plan);
}

void TcpInitiator::Housekeeping() {
  absl::Duration period = absl::Milliseconds(100);
  while (!stop_.WaitForNotificationWithTimeout(period)) {
    housekeeping_ns_.store(absl::GetCurrentTimeNanos());
    std::vector<std::shared_ptr<TcpLink>> reap;
    std::vector<std::shared_ptr<TcpLink>> live, overdue;
    size_t waiting_destinations = 0;
    const absl::Time now = absl::Now();
    {
      absl::MutexLock lock(&mu_);
      for (auto& [key, vec] : links_)
        for (auto& l : vec) live.push_back(l);
      for (auto& l : retiring_) {
        live.push_back(l);
        if (now - l->retired_at() > options_.handover_timeout) overdue.push_back(l);
      }
      waiting_destinations = wait_order_.size();
    }
    for (auto& l : live) l->CheckStall(now, options_.op_timeout);
    live.clear();
    // Outside mu_: failing the chunks completes the link's drain (OnDrained takes mu_).
    for (auto& l : overdue) {
      l->Fail(absl::UnavailableError(absl::StrCat(
          "tcp target ", l->destination().Key(), " did not finish its ops within ",
          absl::FormatDuration(options_.handover_timeout), " of its turn on a link ending while ",
          waiting_destinations, " other client(s) waited for one (--tcp-handover-timeout-ms)")));
    }
    overdue.clear();
    Plan plan;
    {
      absl::MutexLock lock(&mu_);
      // Idle links are closed under mu_: Submit picks a link and enqueues on it under mu_ too,
      // so a link seen idle here cannot be handed an op before Fail. Checked outside mu_, a
      // Submit in between had its fresh op fail with CANCELLED "idle link closed". With
      // nothing outstanding, Fail runs no callbacks, so calling it under mu_ is safe.
      for (auto& [key, vec] : links_) {
        for (auto& l : vec) {
          if (l->outstanding_bytes() == 0 && now - l->last_activity() > options_.idle_timeout) {
            l->Fail(absl::CancelledError("idle link closed"));
          }
        }
      }
      ReapDeadLocked();
      // Ops that waited longer than an op may take fail; the rest get links as turns end.
      for (auto it = waiting_.begin(); it != waiting_.end();) {
        std::deque<Waiter>& queue = it->second;
        while (!queue.empty() && now - queue.front().since > options_.op_timeout) {
          plan.failed.emplace_back(
              std::move(queue.front().done),
              absl::DeadlineExceededError(absl::StrCat(
                  "no tcp link to ", Dest(queue.front().op).Key(), " within ",
                  absl::FormatDuration(options_.op_timeout), ": all ", options_.max_links,
                  " links stayed busy (--tcp-max-links)")));
          queue.pop_front();
          --waiting_ops_;
        }
        if (queue.empty()) {
          std::erase(wait_order_, it->first);
          it = waiting_.erase(it);
        } else {
          ++it;
        }
      }
      if (!wait_order_.empty()) ScheduleLocked(now, plan);
      EnqueueLocked(plan);
      // While destinations wait, come round often enough to end turns on time.
      period = wait_order_.empty() ? absl::Milliseconds(100)
                                   : std::clamp(options_.turn / 4, absl::Milliseconds(1),
                                                absl::Milliseconds(100));
      reap.swap(graveyard_);
    }
    Finish(plan);
    reap.clear();  // joins the dead links' threads outside the lock
  }
}

}  // namespace gdr
