#include "daemon/transport/tcp/tcp_initiator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/ip_address.h"
#include "common/status_macros.h"
#include "common/tcp_proof.h"
#include "common/units.h"

namespace gdr {
namespace {

// The pool key of an op's links. The secret goes in as its SHA-256 digest: map lookups compare
// keys byte by byte, and comparing the secret itself would tell a guesser, by timing, how much
// of a live link's secret it got right.
std::string PoolKey(const TransferOp& op) {
  const tcpwire::Digest d = tcpwire::SecretDigest(op.tcp.secret);
  return absl::StrCat(op.tcp.Key(), "|", TcpTargetRule::CallerClass(op.caller), "|",
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
  housekeeper_ = std::thread([this] { Housekeeping(); });
}

TcpInitiator::~TcpInitiator() { Shutdown(); }

void TcpInitiator::Shutdown() {
  std::vector<std::shared_ptr<TcpLink>> all;
  {
    absl::MutexLock lock(&mu_);
    if (!shutdown_) {
      shutdown_ = true;
      stop_.Notify();
    }
    for (auto& [key, vec] : links_)
      for (auto& l : vec) all.push_back(std::move(l));
    links_.clear();
    total_links_ = 0;
    for (auto& l : graveyard_) all.push_back(std::move(l));
    graveyard_.clear();
  }
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
  return s;
}

std::string TcpInitiator::Describe() const {
  return absl::StrCat("software one-sided emulation over TCP; up to ", options_.max_links,
                      " links (", options_.links_per_target, " per client), chunks of ",
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
}

size_t TcpInitiator::Plan::IndexOf(const std::shared_ptr<TcpLink>& link) {
  for (size_t i = 0; i < links.size(); ++i)
    if (links[i] == link) return i;
  links.push_back(link);
  chunks.emplace_back();
  bytes.push_back(0);
  return links.size() - 1;
}

std::shared_ptr<TcpLink> TcpInitiator::OpenLinkLocked(const TransferOp& op,
                                                      const std::string& key, const Plan& plan) {
  if (total_links_ >= options_.max_links) {
    // Evict the longest-idle link of another destination.
    std::shared_ptr<TcpLink>* victim = nullptr;
    absl::Time oldest = absl::InfiniteFuture();
    for (auto& [k, vec] : links_) {
      if (k == key) continue;
      for (auto& l : vec) {
        if (l->outstanding_bytes() != 0) continue;
        if (std::find(plan.links.begin(), plan.links.end(), l) != plan.links.end()) continue;
        const absl::Time t = l->last_activity();
        if (t < oldest) {
          oldest = t;
          victim = &l;
        }
      }
    }
    if (victim == nullptr) return nullptr;
    (*victim)->Fail(absl::CancelledError("idle link evicted for another destination"));
    ReapDeadLocked();
  }
  auto link = std::make_shared<TcpLink>(op.tcp, op.caller, rule_, options_.link);
  links_[key].push_back(link);
  ++total_links_;
  return link;
}

absl::Status TcpInitiator::PlanLocked(const TransferOp& op, OpDone& done, Plan& plan) {
  const uint64_t chunk = options_.chunk_bytes;
  const uint64_t nchunks = (op.length + chunk - 1) / chunk;
  const auto opcode = op.direction == Direction::kStoreToClient ? tcpwire::Opcode::kWriteReq
                                                                : tcpwire::Opcode::kReadReq;
  // An address literal is judged here, so a refused target costs no link, thread or socket.
  if (absl::StatusOr<IpAddress> ip = IpAddress::Parse(op.tcp.host); ip.ok()) {
    GDR_RETURN_IF_ERROR(rule_->Check(op.caller, op.tcp.Key(), *ip));
  }
  const std::string key = PoolKey(op);
  auto& existing = links_[key];
  std::erase_if(existing, [this](const std::shared_ptr<TcpLink>& l) {
    if (!l->dead()) return false;
    BuryLocked(l);
    return true;
  });
  // This destination's links as indices into `plan`, with their load (enqueued + planned).
  std::vector<size_t> mine;
  std::vector<uint64_t> load;
  for (auto& l : existing) {
    const size_t idx = plan.IndexOf(l);
    mine.push_back(idx);
    load.push_back(l->outstanding_bytes() + plan.bytes[idx]);
  }
  std::shared_ptr<OpState> state;
  for (uint64_t i = 0; i < nchunks; ++i) {
    size_t best = 0;
    for (size_t j = 1; j < load.size(); ++j)
      if (load[j] < load[best]) best = j;
    const bool want_more =
        load.empty() || (load[best] >= chunk && mine.size() < options_.links_per_target);
    if (want_more) {
      if (auto link = OpenLinkLocked(op, key, plan)) {
        mine.push_back(plan.IndexOf(link));
        load.push_back(0);
        best = mine.size() - 1;
      } else if (mine.empty()) {
        // Only possible before the first chunk: nothing of this op is planned.
        if (links_[key].empty()) links_.erase(key);
        return absl::ResourceExhaustedError(absl::StrCat(
            "tcp initiator pool is full: all ", options_.max_links,
            " links are busy with other clients; retry later"));
      }
    }
    if (state == nullptr) {
      state = std::make_shared<OpState>(static_cast<uint32_t>(nchunks), std::move(done),
                                        &ops_in_flight_);
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
  }
  return absl::OkStatus();
}

absl::Status TcpInitiator::Submit(const TransferOp& op, OpDone done) {
  Plan plan;
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::CancelledError("daemon is shutting down");
  GDR_RETURN_IF_ERROR(PlanLocked(op, done, plan));
  for (size_t i = 0; i < plan.links.size(); ++i)
    if (!plan.chunks[i].empty()) plan.links[i]->Enqueue(std::move(plan.chunks[i]));
  return absl::OkStatus();
}

void TcpInitiator::SubmitBatch(std::span<Submission> batch) {
  Plan plan;
  absl::MutexLock lock(&mu_);
  for (Submission& s : batch) {
    s.status = shutdown_ ? absl::CancelledError("daemon is shutting down")
                         : PlanLocked(s.op, s.done, plan);
  }
  // Enqueued under mu_ like Submit, so housekeeping never sees a planned link as idle.
  for (size_t i = 0; i < plan.links.size(); ++i)
    if (!plan.chunks[i].empty()) plan.links[i]->Enqueue(std::move(plan.chunks[i]));
}

void TcpInitiator::Housekeeping() {
  while (!stop_.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    housekeeping_ns_.store(absl::GetCurrentTimeNanos());
    std::vector<std::shared_ptr<TcpLink>> reap;
    std::vector<std::shared_ptr<TcpLink>> live;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [key, vec] : links_)
        for (auto& l : vec) live.push_back(l);
    }
    const absl::Time now = absl::Now();
    for (auto& l : live) l->CheckStall(now, options_.op_timeout);
    live.clear();
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
      reap.swap(graveyard_);
    }
    reap.clear();  // joins the dead links' threads outside the lock
  }
}

}  // namespace gdr
