// The tcp link pool's decisions, apart from its sockets and threads: which links a destination
// has, when it opens another, waits or takes an idle link's place, which link each chunk of an
// op goes to, and whose turn ends so that a waiting destination gets a link. Bookkeeping only, as
// dc/dci_scheduler is for DCIs: the TcpInitiator holds it under its lock, tells it the time,
// opens the links it asks for, builds the chunks it places and does all the I/O.
//
// Policy:
//  - Links are pooled per destination key (TcpInitiator: host:port, caller class, secret
//    digest), `max_links` in all. A destination's share is `links_per_target`; it may hold up
//    to `max_links_per_target` while the pool has room. Links past the share are "above share".
//  - An op is cut into ChunkOf's chunks. Each goes to the first of its destination's links
//    with less than a chunk outstanding (so small ops keep to one link however many bulk ones
//    opened); when every link carries a full chunk, to a new link while the destination has
//    fewer than `max_links_per_target`, the pool has room and nobody waits, else to the least
//    loaded. A destination that wanted that link and could not have it asks for one (it
//    "grows"); asking stops once its links no longer all carry a full chunk.
//  - A destination with no link opens one when the pool has room, or closes the longest-idle
//    link of another destination that is above its share or whose turn (`turn` since it
//    opened) is over; otherwise it waits, in FIFO order, as do its later ops and every
//    destination that comes after it.
//  - While destinations wait or grow, links retire (take no new work; at most
//    max(1, max_links / 8) at a time, one per waiting destination and one more while any
//    grows), and each one that drains is closed and its place given to the next waiting
//    destination, else to the growing one with fewest links. For a waiting destination: a link
//    of a destination above its share first, at once (of the one with most links), then links
//    past their turn, a destination's extra links first, then the longest-serving. For a
//    growing one: only a link of a destination above its share holding at least two more
//    links than it, or idle for a turn, at once. So a share is kept whoever comes, links above
//    shares spread evenly over busy destinations, and none moves back and forth: they need no
//    turn, as their destination cannot take one back while anybody waits or grows. A retired
//    link that does not drain within `handover_timeout` is overdue: its ops are failed.
//  - Links idle for `idle_timeout` are closed, those above the share already after
//    `extra_idle_timeout`; dead ones leave the pool (counted as errors unless the pool closed
//    them itself); ops that wait longer than `op_timeout` expire.
// Header-only: `Link` is TcpLink in the daemon and a fake in the tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/transport/initiator.h"
#include "daemon/transport/tcp/tcp_options.h"

namespace gdr {

// An op waiting for its destination to get a link.
struct TcpWaiter {
  TransferOp op;
  OpDone done;
  absl::Time since;
};

// `Link` provides: dead(), error(), outstanding_bytes(), outstanding_chunks(), opened_at(),
// last_activity(), retired_at(), Retire(std::function<void()> on_drained) (true: nothing was
// outstanding and on_drained never runs) and Fail(status) (runs no callback when nothing is
// outstanding, so the scheduler may call it under the caller's lock). Not thread-safe: the
// caller serialises every call.
template <class Link>
class TcpLinkScheduler {
 public:
  using LinkPtr = std::shared_ptr<Link>;
  // Opens a link for `op`'s destination (it connects on its own threads, never blocking here).
  using OpenLink = std::function<LinkPtr(const TransferOp& op)>;
  // A retired link finished (or failed) its last chunk; runs on the thread that completed it,
  // without the caller's lock: it should take the lock and call Drained.
  using OnDrained = std::function<void(Link* link)>;
  // The size `op` is cut into (what its client asked for); null: chunk_bytes for every op.
  using ChunkOf = std::function<uint64_t(const TransferOp& op)>;

  // What one call (a Submit, a batch, a housekeeping round, a drain) planned: the links it put
  // chunks on, with the bytes it put on each. The same call never closes or retires a link it
  // planned on. The initiator's plan builds the chunks and sends them once the call is done.
  class Plan {
   public:
    virtual ~Plan() = default;
    // Links in the order they were first planned on; AddChunk's `link` indexes this.
    const std::vector<LinkPtr>& links() const { return links_; }
    bool Has(const LinkPtr& link) const {
      return std::find(links_.begin(), links_.end(), link) != links_.end();
    }
    // `op` is placed: `chunks` calls of AddChunk follow. Takes `done`.
    virtual void BeginOp(const TransferOp& op, OpDone& done, uint32_t chunks) = 0;
    // The chunk of `op` at byte `offset`, `length` bytes long, goes on links()[link].
    virtual void AddChunk(const TransferOp& op, size_t link, uint64_t offset,
                          uint32_t length) = 0;

   private:
    friend class TcpLinkScheduler;
    size_t IndexOf(const LinkPtr& link) {
      for (size_t i = 0; i < links_.size(); ++i)
        if (links_[i] == link) return i;
      links_.push_back(link);
      bytes_.push_back(0);
      return links_.size() - 1;
    }
    std::vector<LinkPtr> links_;
    std::vector<uint64_t> bytes_;  // per link
  };

  TcpLinkScheduler(const TcpInitiatorOptions& options, OpenLink open, OnDrained on_drained,
                   ChunkOf chunk_of = nullptr)
      : options_(options), open_(std::move(open)), on_drained_(std::move(on_drained)),
        chunk_of_(chunk_of ? std::move(chunk_of)
                           : [c = options.chunk_bytes](const TransferOp&) { return c; }) {}

  // Places `op`, whose links are pooled under `key`: its chunks over the key's links in `plan`,
  // or, when the destination gets no link now, in the wait queue. Takes `done` either way.
  void Place(const std::string& key, const TransferOp& op, OpDone& done, absl::Time now,
             Plan& plan);
  // Gives links to waiting destinations while the pool has room, then retires links whose turn
  // is over until every waiting destination has one on its way. Ops of a destination that got
  // a link are placed in `plan`.
  void Schedule(absl::Time now, Plan& plan);
  // `link`, retired, has drained: it is closed and its place handed over (the waiting ops that
  // get it are placed in `plan`). Nothing happens for a link the pool no longer holds.
  void Drained(Link* link, absl::Time now, Plan& plan);

  // Housekeeping. Closes pooled links with nothing outstanding and no activity for
  // `idle_timeout`, or for `extra_idle_timeout` while their destination is above its share
  // (they are reaped once dead).
  void CloseIdle(absl::Time now);
  // Moves dead links out of the pool.
  void ReapDead();
  // Removes and returns the ops that waited longer than `op_timeout` (destinations in key
  // order, each one's oldest first).
  std::vector<TcpWaiter> TakeExpired(absl::Time now);
  // Retired links that have not drained within `handover_timeout` of retiring.
  std::vector<LinkPtr> Overdue(absl::Time now) const;
  // Links out of the pool, still referenced here so the caller can drop them outside its lock
  // (a TcpLink joins its threads when destroyed).
  std::vector<LinkPtr> TakeClosed() { return std::exchange(closed_, {}); }
  // Empties the pool for shutdown: every link (pooled, retiring, closed) and every waiting op.
  void TakeAll(std::vector<LinkPtr>& links, std::vector<TcpWaiter>& waiters);

  // Calls `f(const LinkPtr&)` for each pooled link, then (Live) for each retiring one too.
  template <class F>
  void ForEachPooled(F f) const {
    for (const auto& [key, vec] : links_)
      for (const LinkPtr& l : vec) f(l);
  }
  template <class F>
  void ForEachLive(F f) const {
    ForEachPooled(f);
    for (const LinkPtr& l : retiring_) f(l);
  }

  uint32_t links() const { return total_links_; }  // pooled and retiring
  uint32_t destinations() const { return static_cast<uint32_t>(links_.size()); }
  size_t links_of(const std::string& key) const {
    auto it = links_.find(key);
    return it == links_.end() ? 0 : it->second.size();
  }
  size_t retiring() const { return retiring_.size(); }
  size_t waiting_destinations() const { return wait_order_.size(); }
  // Destinations that asked for one more link (none left stale by Schedule).
  size_t growing() const { return growing_.size(); }
  // Waiting or growing: while nonzero, Schedule may have work (the initiator schedules on a
  // Submit when a destination starts waiting, and on every housekeeping round while nonzero).
  size_t wanting() const { return wait_order_.size() + growing_.size(); }
  uint64_t waiting_ops() const { return waiting_ops_; }
  // Links closed so that a waiting destination could have one.
  uint64_t handovers() const { return handovers_; }
  // Links that left the pool dead of a failure (not closed by the pool: idle, handed over).
  uint64_t link_errors() const { return link_errors_; }

 private:
  // A destination with links that asked for one more; `op` opens it.
  struct Grower { std::string key; TransferOp op; };
  // A pooled link chosen to retire or to be evicted: links_[key][index].
  struct Pick { std::vector<LinkPtr>* vec = nullptr; size_t index = 0; };

  LinkPtr Open(const TransferOp& op, const std::string& key) {
    LinkPtr link = open_(op);
    links_[key].push_back(link);
    ++total_links_;
    return link;
  }
  uint32_t cap() const {
    return std::max(options_.links_per_target, options_.max_links_per_target);
  }
  bool AboveShare(size_t links) const { return links > options_.links_per_target; }
  // `key` may open a link now: room, no destination waits, no other grows (HandOver decides
  // between several).
  bool MayOpen(const std::string& key) const {
    return total_links_ < options_.max_links && wait_order_.empty() &&
           (growing_.empty() || (growing_.size() == 1 && growing_.front().key == key));
  }
  // A link's load: outstanding, plus what `plan` put on it.
  static uint64_t Load(const LinkPtr& l, const Plan& plan) {
    for (size_t i = 0; i < plan.links_.size(); ++i)
      if (plan.links_[i] == l) return l->outstanding_bytes() + plan.bytes_[i];
    return l->outstanding_bytes();
  }
  // A growing destination still has links, fewer than the cap, each carrying a full chunk.
  bool StillGrowing(const Grower& g, const Plan& plan) const {
    auto it = links_.find(g.key);
    if (it == links_.end() || it->second.size() >= cap()) return false;
    const uint64_t chunk = chunk_of_(g.op);
    for (const LinkPtr& l : it->second)
      if (l->dead() || Load(l, plan) < chunk) return false;
    return true;
  }
  // The link to retire for a destination waiting for one.
  Pick PickForWaiter(absl::Time now, const Plan& plan);
  // The link to retire for `grower`, a growing destination.
  Pick PickForGrower(const std::string& grower, absl::Time now, const Plan& plan);
  // The growing destination with fewest links (the first to ask among equals): the next to get
  // one, as PickForGrower retires for it. Drops those no longer growing; end() when none is.
  typename std::deque<Grower>::iterator NextGrower(const Plan& plan) {
    std::erase_if(growing_, [&](const Grower& g) { return !StillGrowing(g, plan); });
    return std::min_element(growing_.begin(), growing_.end(),
                            [this](const Grower& a, const Grower& b) {
                              return links_of(a.key) < links_of(b.key);
                            });
  }
  // Cuts `op` into chunks over the links of `key` (at least one).
  void PlaceChunks(const std::string& key, const TransferOp& op, OpDone& done, Plan& plan);
  // Closes an idle link of another destination: above its share if any, else the longest-idle
  // one whose turn is over (never one that `plan` has chunks for); false when there is none.
  bool EvictIdle(const std::string& key, const Plan& plan, absl::Time now);
  void HandOver(absl::Time now, Plan& plan);
  // Closes a link with nothing outstanding that leaves its destination for a waiting one.
  void HandedOver(LinkPtr link);
  void Bury(LinkPtr link) {
    if (!absl::IsCancelled(link->error())) ++link_errors_;
    closed_.push_back(std::move(link));
    --total_links_;
  }

  const TcpInitiatorOptions options_;
  const OpenLink open_;
  const OnDrained on_drained_;
  const ChunkOf chunk_of_;
  std::map<std::string, std::vector<LinkPtr>> links_;
  // Links retired from their destination, draining; still counted in total_links_.
  std::vector<LinkPtr> retiring_;
  // Destinations without a link, in the order they started waiting, and their ops.
  std::deque<std::string> wait_order_;
  std::map<std::string, std::deque<TcpWaiter>> waiting_;
  // Destinations that asked for one more link, in the order they asked (each once).
  std::deque<Grower> growing_;
  uint64_t waiting_ops_ = 0;
  uint64_t handovers_ = 0;
  uint32_t total_links_ = 0;
  std::vector<LinkPtr> closed_;
  uint64_t link_errors_ = 0;
};

template <class Link>
void TcpLinkScheduler<Link>::Place(const std::string& key, const TransferOp& op, OpDone& done,
                                   absl::Time now, Plan& plan) {
  auto wait = [&] {
    auto [it, first] = waiting_.try_emplace(key);
    if (first) wait_order_.push_back(key);
    it->second.push_back(TcpWaiter{op, std::move(done), now});
    ++waiting_ops_;
  };
  // Behind its own earlier ops; and behind every waiting destination (first come, first served).
  if (waiting_.contains(key)) return wait();
  auto found = links_.find(key);
  if (found != links_.end()) {
    std::erase_if(found->second, [this](const LinkPtr& l) {
      if (!l->dead()) return false;
      Bury(l);
      return true;
    });
    if (found->second.empty()) links_.erase(found);
  }
  if (!links_.contains(key)) {
    if (!wait_order_.empty()) return wait();
    if (total_links_ >= options_.max_links && !EvictIdle(key, plan, now)) return wait();
    Open(op, key);
  }
  PlaceChunks(key, op, done, plan);
}

template <class Link>
void TcpLinkScheduler<Link>::PlaceChunks(const std::string& key, const TransferOp& op,
                                         OpDone& done, Plan& plan) {
  const uint64_t chunk = chunk_of_(op);
  const uint64_t nchunks = (op.length + chunk - 1) / chunk;
  // This destination's links as indices into `plan`, with their load (enqueued + planned).
  std::vector<size_t> mine;
  std::vector<uint64_t> load;
  for (auto& l : links_[key]) {
    const size_t idx = plan.IndexOf(l);
    mine.push_back(idx);
    load.push_back(l->outstanding_bytes() + plan.bytes_[idx]);
  }
  plan.BeginOp(op, done, static_cast<uint32_t>(nchunks));
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
      // Every link carries a full chunk: open another, while the pool has room and nobody
      // waits for one; else ask for one (Schedule may take it from a destination above its
      // share; HandOver gives it when room comes).
      if (mine.size() < cap()) {
        if (MayOpen(key)) {
          std::erase_if(growing_, [&key](const Grower& g) { return g.key == key; });
          mine.push_back(plan.IndexOf(Open(op, key)));
          load.push_back(0);
          best = mine.size() - 1;
        } else if (std::none_of(growing_.begin(), growing_.end(),
                                [&key](const Grower& g) { return g.key == key; })) {
          growing_.push_back(Grower{key, op});
        }
      }
    }
    const auto length = static_cast<uint32_t>(std::min(chunk, op.length - i * chunk));
    load[best] += length;
    plan.bytes_[mine[best]] += length;
    plan.AddChunk(op, mine[best], i * chunk, length);
  }
}

template <class Link>
bool TcpLinkScheduler<Link>::EvictIdle(const std::string& key, const Plan& plan,
                                       absl::Time now) {
  std::vector<LinkPtr>* victim_vec = nullptr;
  size_t victim = 0;
  bool victim_above = false;
  absl::Time oldest = absl::InfiniteFuture();
  for (auto& [k, vec] : links_) {
    if (k == key) continue;
    const bool above = AboveShare(vec.size());
    for (size_t i = 0; i < vec.size(); ++i) {
      const auto& l = vec[i];
      // A link inside its turn is not taken even when idle for a moment between two ops:
      // taking it would only make its destination take another's, and so on (thrashing).
      // One above its destination's share is: that destination cannot take one back.
      if (l->outstanding_chunks() != 0 || (!above && now - l->opened_at() < options_.turn)) {
        continue;
      }
      if (plan.Has(l)) continue;
      const absl::Time t = l->last_activity();
      if ((above && !victim_above) || (above == victim_above && t < oldest)) {
        oldest = t;
        victim_vec = &vec;
        victim = i;
        victim_above = above;
      }
    }
  }
  if (victim_vec == nullptr) return false;
  LinkPtr l = std::move((*victim_vec)[victim]);
  victim_vec->erase(victim_vec->begin() + static_cast<ptrdiff_t>(victim));
  HandedOver(std::move(l));
  std::erase_if(links_, [](const auto& kv) { return kv.second.empty(); });
  return true;
}

template <class Link>
void TcpLinkScheduler<Link>::HandedOver(LinkPtr link) {
  // Nothing outstanding (or already failed): Fail runs no callback.
  link->Fail(absl::CancelledError("link handed over to a waiting destination"));
  Bury(std::move(link));
  ++handovers_;
}

template <class Link>
void TcpLinkScheduler<Link>::HandOver(absl::Time now, Plan& plan) {
  while (total_links_ < options_.max_links) {
    if (!wait_order_.empty()) {
      auto node = waiting_.extract(wait_order_.front());
      wait_order_.pop_front();
      std::deque<TcpWaiter>& queue = node.mapped();
      waiting_ops_ -= queue.size();
      Open(queue.front().op, node.key());
      for (TcpWaiter& w : queue) Place(node.key(), w.op, w.done, now, plan);
      continue;
    }
    auto next = NextGrower(plan);
    if (next == growing_.end()) return;
    Grower g = std::move(*next);
    growing_.erase(next);
    Open(g.op, g.key);
  }
}

template <class Link>
typename TcpLinkScheduler<Link>::Pick TcpLinkScheduler<Link>::PickForWaiter(absl::Time now,
                                                                           const Plan& plan) {
  // Ranked: 0, a link of a destination above its share (most links first, then the least
  // loaded: it drains soonest), at any age; 1, a link past its turn of a destination with
  // more than one; 2, any link past its turn; within 1 and 2 the longest-serving first.
  Pick best;
  std::tuple<int, int64_t, uint64_t, int64_t> best_rank{3, 0, 0, 0};
  for (auto& [key, vec] : links_) {
    const bool above = AboveShare(vec.size());
    for (size_t i = 0; i < vec.size(); ++i) {
      const LinkPtr& l = vec[i];
      if (plan.Has(l)) continue;
      const int64_t opened = absl::ToUnixNanos(l->opened_at());
      std::tuple<int, int64_t, uint64_t, int64_t> rank;
      if (above) {
        rank = {0, -static_cast<int64_t>(vec.size()), l->outstanding_bytes(), -opened};
      } else if (now - l->opened_at() >= options_.turn) {
        rank = {vec.size() > 1 ? 1 : 2, 0, 0, opened};
      } else {
        continue;
      }
      if (rank < best_rank) {
        best_rank = rank;
        best = Pick{&vec, i};
      }
    }
  }
  return best;
}

template <class Link>
typename TcpLinkScheduler<Link>::Pick TcpLinkScheduler<Link>::PickForGrower(
    const std::string& grower, absl::Time now, const Plan& plan) {
  const size_t has = links_of(grower);
  Pick best;
  std::tuple<int64_t, uint64_t, int64_t> best_rank;
  for (auto& [key, vec] : links_) {
    // Only from a destination above its share, and only one holding two more (the grower then
    // holds no more than it, so neither has a reason to take the link back) or a link idle
    // for a turn (unused, not between two ops).
    if (key == grower || !AboveShare(vec.size())) continue;
    const bool more = vec.size() >= has + 2;
    for (size_t i = 0; i < vec.size(); ++i) {
      if (plan.Has(vec[i])) continue;
      if (!more && (vec[i]->outstanding_chunks() != 0 ||
                    now - vec[i]->last_activity() < options_.turn)) {
        continue;
      }
      // The most links first, then the least loaded (it drains soonest), then the newest.
      const std::tuple<int64_t, uint64_t, int64_t> rank{-static_cast<int64_t>(vec.size()),
                                                        vec[i]->outstanding_bytes(),
                                                        -absl::ToUnixNanos(vec[i]->opened_at())};
      if (best.vec == nullptr || rank < best_rank) {
        best_rank = rank;
        best = Pick{&vec, i};
      }
    }
  }
  return best;
}

template <class Link>
void TcpLinkScheduler<Link>::Schedule(absl::Time now, Plan& plan) {
  HandOver(now, plan);
  // Links retire a few at a time: retiring every link whose turn is over at once would stall
  // the whole pool while they drain and reconnect together, turn after turn.
  const size_t most = std::max<uint32_t>(1, options_.max_links / 8);
  // Each round retires a link or closes one and hands its place over; the bound is a guard.
  for (uint32_t round = 0; round <= options_.max_links; ++round) {
    const auto grower = NextGrower(plan);
    const bool grows = grower != growing_.end();
    // As many retiring as destinations wait (HandOver serves them first), and one more while
    // any grows: links move to growing destinations one at a time, each to the one with
    // fewest, which HandOver serves next (if it has no link to take, none has).
    if (retiring_.size() >= std::min(wait_order_.size() + (grows ? 1 : 0), most)) return;
    const Pick pick = retiring_.size() < wait_order_.size() ? PickForWaiter(now, plan)
                                                            : PickForGrower(grower->key, now, plan);
    if (pick.vec == nullptr) return;
    LinkPtr link = std::move((*pick.vec)[pick.index]);
    pick.vec->erase(pick.vec->begin() + static_cast<ptrdiff_t>(pick.index));
    std::erase_if(links_, [](const auto& kv) { return kv.second.empty(); });
    Link* raw = link.get();
    if (link->Retire([this, raw] { on_drained_(raw); })) {
      HandedOver(std::move(link));
      HandOver(now, plan);
    } else {
      retiring_.push_back(std::move(link));
    }
  }
}

template <class Link>
void TcpLinkScheduler<Link>::Drained(Link* raw, absl::Time now, Plan& plan) {
  auto it = std::find_if(retiring_.begin(), retiring_.end(),
                         [raw](const LinkPtr& l) { return l.get() == raw; });
  if (it == retiring_.end()) return;
  LinkPtr link = std::move(*it);
  retiring_.erase(it);
  // closed_ keeps the last reference: this may be the link's own receiver thread, which must
  // not be the one to join it.
  HandedOver(std::move(link));
  Schedule(now, plan);
}

template <class Link>
void TcpLinkScheduler<Link>::CloseIdle(absl::Time now) {
  const absl::Duration extra = std::min(options_.extra_idle_timeout, options_.idle_timeout);
  for (auto& [key, vec] : links_) {
    size_t live = std::count_if(vec.begin(), vec.end(),
                                [](const LinkPtr& l) { return !l->dead(); });
    // Newest first: small ops keep to the first links, so the last opened idle first.
    for (auto it = vec.rbegin(); it != vec.rend(); ++it) {
      const LinkPtr& l = *it;
      if (l->dead() || l->outstanding_bytes() != 0) continue;
      const absl::Duration idle = now - l->last_activity();
      if (idle > options_.idle_timeout || (AboveShare(live) && idle > extra)) {
        l->Fail(absl::CancelledError("idle link closed"));
        --live;
      }
    }
  }
}

template <class Link>
void TcpLinkScheduler<Link>::ReapDead() {
  for (auto it = links_.begin(); it != links_.end();) {
    auto& vec = it->second;
    for (auto l = vec.begin(); l != vec.end();) {
      if ((*l)->dead()) {
        Bury(std::move(*l));
        l = vec.erase(l);
      } else {
        ++l;
      }
    }
    it = vec.empty() ? links_.erase(it) : std::next(it);
  }
  // A retired link normally leaves through Drained; one that died with nothing outstanding
  // never calls it.
  for (auto l = retiring_.begin(); l != retiring_.end();) {
    if ((*l)->dead() && (*l)->outstanding_chunks() == 0) {
      Bury(std::move(*l));
      l = retiring_.erase(l);
    } else {
      ++l;
    }
  }
}

template <class Link>
std::vector<TcpWaiter> TcpLinkScheduler<Link>::TakeExpired(absl::Time now) {
  std::vector<TcpWaiter> expired;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    std::deque<TcpWaiter>& queue = it->second;
    while (!queue.empty() && now - queue.front().since > options_.op_timeout) {
      expired.push_back(std::move(queue.front()));
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
  return expired;
}

template <class Link>
std::vector<typename TcpLinkScheduler<Link>::LinkPtr> TcpLinkScheduler<Link>::Overdue(
    absl::Time now) const {
  std::vector<LinkPtr> overdue;
  for (const LinkPtr& l : retiring_)
    if (now - l->retired_at() > options_.handover_timeout) overdue.push_back(l);
  return overdue;
}

template <class Link>
void TcpLinkScheduler<Link>::TakeAll(std::vector<LinkPtr>& links,
                                     std::vector<TcpWaiter>& waiters) {
  for (auto& [key, vec] : links_)
    for (auto& l : vec) links.push_back(std::move(l));
  links_.clear();
  for (auto& l : retiring_) links.push_back(std::move(l));
  retiring_.clear();
  growing_.clear();
  total_links_ = 0;
  for (auto& l : closed_) links.push_back(std::move(l));
  closed_.clear();
  for (auto& [key, queue] : waiting_)
    for (TcpWaiter& w : queue) waiters.push_back(std::move(w));
  waiting_.clear();
  wait_order_.clear();
  waiting_ops_ = 0;
}

}  // namespace gdr
