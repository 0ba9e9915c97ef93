#include "daemon/transport/tcp/tcp_initiator.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "common/base/ip_address.h"
#include "common/base/status_macros.h"
#include "common/wire/tcp_proof.h"
#include "common/base/thread_name.h"
#include "common/base/units.h"
#include "daemon/store/mapping_guard.h"

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
  if (options.max_links_per_target < options.links_per_target) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_links_per_target (", options.max_links_per_target,
        ") must be >= links_per_target (", options.links_per_target, ")"));
  }
  if (options.chunk_bytes < 4096 || options.chunk_bytes > tcpwire::kMaxPayload) {
    return absl::InvalidArgumentError(absl::StrCat("chunk size ", options.chunk_bytes,
                                                   " must be in 4096..", tcpwire::kMaxPayload));
  }
  // A Read's answer may be as long as the largest chunk a client can ask for.
  options.link.max_chunk_bytes =
      static_cast<uint32_t>(std::max<uint64_t>(options.chunk_bytes, tcpwire::kMaxAskedChunk));
  return std::unique_ptr<TcpInitiator>(new TcpInitiator(options));
}

TcpInitiator::TcpInitiator(TcpInitiatorOptions options)
    : options_(options),
      rule_(std::make_shared<const TcpTargetRule>(options.target_allow)),
      scheduler_(
          options,
          [this](const TransferOp& op) {
            return std::make_shared<TcpLink>(Dest(op), op.caller, rule_, options_.link);
          },
          [this](TcpLink* link) { OnDrained(link); },
          // A client that stages each piece through a slot (GPU memory) names its slot size:
          // a full slot a copy (docs/benchmarks.md, issue 45).
          [this](const TransferOp& op) -> uint64_t {
            const uint32_t asked = Dest(op).chunk_bytes;
            return asked != 0 ? asked : options_.chunk_bytes;
          }) {
  housekeeping_ns_.store(absl::GetCurrentTimeNanos());
  housekeeper_ = std::thread([this] {
    SetThreadName("gdr-tcp-house");
    Housekeeping();
  });
}

TcpInitiator::~TcpInitiator() { Shutdown(); }

void TcpInitiator::Shutdown() {
  std::vector<std::shared_ptr<TcpLink>> all;
  std::vector<TcpWaiter> waiting;
  {
    absl::MutexLock lock(&mu_);
    if (!shutdown_) {
      shutdown_ = true;
      stop_.Notify();
    }
    scheduler_.TakeAll(all, waiting);
  }
  for (TcpWaiter& w : waiting) w.done(absl::CancelledError("daemon is shutting down"));
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
  absl::Status health;
  scheduler_.ForEachPooled([&](const std::shared_ptr<TcpLink>& l) {
    const absl::Duration busy = l->completion_busy_for();
    if (health.ok() && busy > max_stall) {
      health = absl::UnavailableError(absl::StrCat(
          "tcp completion thread of the link to ", l->destination().Key(),
          " has been inside one op completion for ", absl::FormatDuration(busy)));
    }
  });
  return health;
}

InitiatorStats TcpInitiator::stats() const {
  InitiatorStats s;
  s.capacity = options_.max_links;
  s.in_flight = ops_in_flight_.load(std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  s.in_use = scheduler_.links();
  s.clients = scheduler_.destinations();
  s.errors = scheduler_.link_errors();
  s.waiting = scheduler_.waiting_ops();
  s.handovers = scheduler_.handovers();
  return s;
}

std::string TcpInitiator::Describe() const {
  return absl::StrCat("software one-sided emulation over TCP; up to ", options_.max_links,
                      " links (", options_.links_per_target, " per client, up to ",
                      options_.max_links_per_target,
                      " while the pool has room; beyond that, turns of ",
                      absl::FormatDuration(options_.turn), "), chunks of ",
                      FormatSize(options_.chunk_bytes), " (or the size a client asks for, ",
                      FormatSize(tcpwire::kMinAskedChunk), "..",
                      FormatSize(tcpwire::kMaxAskedChunk), "); ", rule_->Describe(),
                      ", each proving the caller's secret; ",
                      options_.inline_max == 0
                          ? std::string("no Write answered inline")
                          : absl::StrCat("Writes up to ", FormatSize(options_.inline_max),
                                         " answered inline to clients that take it"));
}

void TcpInitiator::Plan::BeginOp(const TransferOp& o, OpDone& done, uint32_t n) {
  op = std::make_shared<OpState>(n, std::move(done), in_flight);
  opcode = o.direction == Direction::kStoreToClient ? tcpwire::Opcode::kWriteReq
                                                    : tcpwire::Opcode::kReadReq;
}

void TcpInitiator::Plan::AddChunk(const TransferOp& o, size_t link, uint64_t offset,
                                  uint32_t length) {
  if (chunks.size() <= link) chunks.resize(link + 1);
  Chunk c;
  c.opcode = opcode;
  c.local = o.local + offset;
  c.length = length;
  c.remote_address = o.remote_address + offset;
  c.rkey = o.rkey;
  c.op = op;
  chunks[link].push_back(std::move(c));
  if (offset == 0 && o.inject == InjectedFault::kBreakPath) {
    dropped.push_back(links()[link]);
  }
}

absl::Status TcpInitiator::CheckLiteralTarget(const TransferOp& op) const {
  if (absl::StatusOr<IpAddress> ip = IpAddress::Parse(Dest(op).host); ip.ok()) {
    return rule_->Check(op.caller, Dest(op).Key(), *ip);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TcpInitiator::KeyOf(const TransferOp& op) const {
  if (DestinationOf<TcpDestination>(op) == nullptr) return NotTcp();
  // An address literal is judged here, so a refused target costs no link, thread or socket.
  // (An op that waits for a link is not judged again when it gets one: the rule and the op
  // are what they were.)
  GDR_RETURN_IF_ERROR(CheckLiteralTarget(op));
  return PoolKey(op);
}

void TcpInitiator::OnDrained(TcpLink* raw) {
  Plan plan(&ops_in_flight_);
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return;
    scheduler_.Drained(raw, absl::Now(), plan);
    EnqueueLocked(plan);
  }
  Finish(plan);
}

void TcpInitiator::EnqueueLocked(Plan& plan) {
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    if (plan.chunks[i].empty()) continue;
    const std::shared_ptr<TcpLink>& link = plan.links()[i];
    if (link->Enqueue(std::move(plan.chunks[i]))) plan.claimed.push_back(link);
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

bool TcpInitiator::TryInline(const TransferOp& op, OpDone& done) const {
  InlineAnswer* const answer = op.inline_answer;
  if (answer == nullptr || op.direction != Direction::kStoreToClient ||
      op.inject != InjectedFault::kNone) {
    return false;
  }
  uint64_t at = 0;
  if (answer->bytes.empty()) {
    const uint64_t limit = std::min(options_.inline_max, Dest(op).inline_max);
    if (op.length > limit || op.remote_address != answer->address ||
        op.length != answer->length) {
      return false;
    }
  } else {
    // Only into bytes the answer already carries: they reach the client together.
    if (op.remote_address < answer->address) return false;
    at = op.remote_address - answer->address;
    if (at > answer->bytes.size() || op.length > answer->bytes.size() - at) return false;
  }
  if (!CheckLiteralTarget(op).ok()) return false;
  if (answer->bytes.empty()) answer->bytes.resize(op.length);
  absl::Status s;
  // Out of the volume's mapping, guarded as every copy out of a file volume is.
  if (std::optional<const void*> fault = RunGuarded(
          [&] { std::memcpy(answer->bytes.data() + at, op.local, op.length); })) {
    s = MappingFaultStatus(*fault);
  }
  OpDone d = std::move(done);
  d(std::move(s));
  return true;
}

absl::Status TcpInitiator::Submit(const TransferOp& op, OpDone done) {
  if (DestinationOf<TcpDestination>(op) == nullptr) return NotTcp();
  if (TryInline(op, done)) return absl::OkStatus();
  const absl::StatusOr<std::string> key = KeyOf(op);
  Plan plan(&ops_in_flight_);
  absl::Status s;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) return absl::CancelledError("daemon is shutting down");
    const size_t waiting_before = scheduler_.waiting_destinations();
    s = key.status();
    if (s.ok()) scheduler_.Place(*key, op, done, absl::Now(), plan);
    // Only a destination that started waiting now can change what is due; turns that end and
    // links for destinations that asked for one more are the housekeeper's (a scan of every
    // link on every op would serialise the pool).
    if (scheduler_.waiting_destinations() > waiting_before) scheduler_.Schedule(absl::Now(), plan);
    // Enqueued under mu_, so housekeeping never sees a planned link as idle; sent after it.
    EnqueueLocked(plan);
  }
  Finish(plan);
  return s;
}

void TcpInitiator::SubmitBatch(std::span<Submission> batch) {
  // Per op, its pool key; none for an op answered inline here, which takes no part in the
  // placement below.
  std::vector<std::optional<absl::StatusOr<std::string>>> keys;
  keys.reserve(batch.size());
  for (Submission& s : batch) {
    if (DestinationOf<TcpDestination>(s.op) != nullptr && TryInline(s.op, s.done)) {
      s.status = absl::OkStatus();
      keys.emplace_back();
    } else {
      keys.emplace_back(KeyOf(s.op));
    }
  }
  Plan plan(&ops_in_flight_);
  {
    absl::MutexLock lock(&mu_);
    const size_t waiting_before = scheduler_.waiting_destinations();
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < batch.size(); ++i) {
      if (!keys[i].has_value()) continue;
      const absl::StatusOr<std::string>& key = *keys[i];
      Submission& s = batch[i];
      s.status = shutdown_ ? absl::CancelledError("daemon is shutting down") : key.status();
      if (s.status.ok()) scheduler_.Place(*key, s.op, s.done, now, plan);
    }
    if (scheduler_.waiting_destinations() > waiting_before) scheduler_.Schedule(absl::Now(), plan);
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
      scheduler_.ForEachLive([&](const std::shared_ptr<TcpLink>& l) { live.push_back(l); });
      overdue = scheduler_.Overdue(now);
      waiting_destinations = scheduler_.waiting_destinations();
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
    Plan plan(&ops_in_flight_);
    {
      absl::MutexLock lock(&mu_);
      // Idle links are closed under mu_: Submit picks a link and enqueues on it under mu_ too,
      // so a link seen idle here cannot be handed an op before Fail. Checked outside mu_, a
      // Submit in between had its fresh op fail with CANCELLED "idle link closed". With
      // nothing outstanding, Fail runs no callbacks, so calling it under mu_ is safe.
      scheduler_.CloseIdle(now);
      scheduler_.ReapDead();
      // Ops that waited longer than an op may take fail; the rest get links as turns end.
      for (TcpWaiter& w : scheduler_.TakeExpired(now)) {
        plan.failed.emplace_back(
            std::move(w.done),
            absl::DeadlineExceededError(absl::StrCat(
                "no tcp link to ", Dest(w.op).Key(), " within ",
                absl::FormatDuration(options_.op_timeout), ": all ", options_.max_links,
                " links stayed busy (--tcp-max-links)")));
      }
      if (scheduler_.wanting() != 0) scheduler_.Schedule(now, plan);
      EnqueueLocked(plan);
      // While destinations wait (or grow), come round often enough to end turns on time.
      period = scheduler_.wanting() == 0
                   ? absl::Milliseconds(100)
                   : std::clamp(options_.turn / 4, absl::Milliseconds(1), absl::Milliseconds(100));
      reap = scheduler_.TakeClosed();
    }
    Finish(plan);
    reap.clear();  // joins the dead links' threads outside the lock
  }
}

}  // namespace gdr
