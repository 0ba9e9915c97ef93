// A fake tcp link and a driver for TcpLinkScheduler (daemon/transport/tcp/tcp_link_scheduler.h):
// the scheduler over links whose state the test sets, called the way TcpInitiator calls it
// (place, schedule, enqueue, housekeeping rounds, drains) on a clock the test moves.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/transport/tcp/tcp_link_scheduler.h"
#include "gtest/gtest.h"

namespace gdr::tcp_link_scheduler_test {

// A link as the scheduler sees it, whose state the test sets. Behaves as TcpLink where the
// scheduler can tell: Fail is idempotent and completes what is outstanding; Retire either
// reports "nothing outstanding" or leaves the drain to the completion of the last chunk.
class FakeLink {
 public:
  // `clock`: the test's time, read when the link is retired.
  FakeLink(std::string dest, const absl::Time* clock)
      : dest(std::move(dest)), opened(*clock), last(*clock), clock_(clock) {}

  bool dead() const { return dead_; }
  absl::Status error() const { return error_; }
  uint64_t outstanding_bytes() const { return bytes; }
  uint64_t outstanding_chunks() const { return chunks; }
  absl::Time opened_at() const { return opened; }
  absl::Time last_activity() const { return last; }
  absl::Time retired_at() const { return retired; }
  bool Retire(std::function<void()> on_drained) {
    on_drained_ = std::move(on_drained);
    retired = *clock_;
    is_retired = true;
    return chunks == 0 && !std::exchange(drain_claimed_, true);
  }
  void Fail(const absl::Status& status) {
    if (dead_) return;
    dead_ = true;
    error_ = status;
    ++fails;
    if (chunks != 0) Complete();
  }
  // Every outstanding chunk answered (or failed); a retired link then reports its drain.
  void Complete() {
    bytes = chunks = 0;
    if (is_retired && !std::exchange(drain_claimed_, true)) on_drained_();
  }

  const std::string dest;
  const absl::Time opened;
  absl::Time last;
  absl::Time retired;
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  bool is_retired = false;
  int fails = 0;

 private:
  const absl::Time* const clock_;
  bool dead_ = false;
  absl::Status error_;
  bool drain_claimed_ = false;
  std::function<void()> on_drained_;
};

using Scheduler = TcpLinkScheduler<FakeLink>;

// One op's chunk as the scheduler placed it.
struct Placed {
  std::string dest;  // of the op
  FakeLink* link;
  uint64_t offset;
  uint32_t length;
};

class RecordingPlan final : public Scheduler::Plan {
 public:
  void BeginOp(const TransferOp& op, OpDone& done, uint32_t chunks) override {
    begun.push_back({op.volume, chunks});
    done = nullptr;  // taken
  }
  void AddChunk(const TransferOp& op, size_t link, uint64_t offset, uint32_t length) override {
    placed.push_back({op.volume, links()[link].get(), offset, length});
  }
  std::vector<std::pair<std::string, uint32_t>> begun;  // destination, chunks
  std::vector<Placed> placed;
};

// An op to `dest`: the fake names its links after op.volume, which the scheduler never reads.
inline TransferOp Op(const std::string& dest, uint64_t length) {
  TransferOp op;
  op.volume = dest;
  op.length = length;
  return op;
}

// The scheduler with the initiator's calling pattern around it.
class PoolDriver {
 public:
  explicit PoolDriver(TcpInitiatorOptions o, Scheduler::ChunkOf chunk_of = nullptr)
      : options(o),
        scheduler(
            o,
            [this](const TransferOp& op) {
              auto link = std::make_shared<FakeLink>(op.volume, &now);
              opened.push_back(link);
              return link;
            },
            [this](FakeLink* link) { drained.push_back(link); }, std::move(chunk_of)) {}

  // Submit / SubmitBatch: place, schedule if a destination started waiting, enqueue.
  RecordingPlan Submit(const std::vector<std::pair<std::string, uint64_t>>& ops) {
    RecordingPlan plan;
    const size_t waiting_before = scheduler.waiting_destinations();
    for (const auto& [dest, length] : ops) {
      OpDone done = [](absl::Status) {};
      scheduler.Place(dest, Op(dest, length), done, now, plan);
      EXPECT_TRUE(done == nullptr) << "Place always takes the op";
    }
    if (scheduler.waiting_destinations() > waiting_before) scheduler.Schedule(now, plan);
    Enqueue(plan);
    return plan;
  }
  RecordingPlan Submit(const std::string& dest, uint64_t length) {
    return Submit({{dest, length}});
  }
  // A housekeeping round: overdue retirees fail, idle links close, dead ones are reaped,
  // expired waiters fail, turns end.
  RecordingPlan Housekeep() {
    for (auto& l : scheduler.Overdue(now)) l->Fail(absl::UnavailableError("overdue"));
    RunDrains();
    RecordingPlan plan;
    scheduler.CloseIdle(now);
    scheduler.ReapDead();
    for (TcpWaiter& w : scheduler.TakeExpired(now)) expired.push_back(w.op.volume);
    if (scheduler.wanting() != 0) scheduler.Schedule(now, plan);
    Enqueue(plan);
    closed += scheduler.TakeClosed().size();
    return plan;
  }
  // Completes every outstanding chunk of `link` at the current time, and any drain that causes.
  RecordingPlan Complete(FakeLink* link) {
    link->last = now;
    link->Complete();
    return RunDrains();
  }
  // Completes every link's chunks, those of links that completions open included; returns the
  // destinations of the ops that were placed on the way.
  std::vector<std::string> CompleteAll() {
    std::vector<std::string> begun;
    for (size_t i = 0; i < opened.size(); ++i) {
      if (opened[i]->chunks == 0) continue;
      for (const auto& b : Complete(opened[i].get()).begun) begun.push_back(b.first);
    }
    return begun;
  }
  std::vector<std::shared_ptr<FakeLink>> LinksTo(const std::string& dest) const {
    std::vector<std::shared_ptr<FakeLink>> out;
    for (auto& l : opened)
      if (l->dest == dest) out.push_back(l);
    return out;
  }

  TcpInitiatorOptions options;
  absl::Time now = absl::UnixEpoch() + absl::Hours(1);
  std::vector<std::shared_ptr<FakeLink>> opened;  // every link the scheduler opened
  std::vector<FakeLink*> drained;
  std::vector<std::string> expired;
  size_t closed = 0;
  Scheduler scheduler;

 private:
  void Enqueue(const RecordingPlan& plan) {
    for (const Placed& p : plan.placed) {
      if (p.link->dead()) continue;  // TcpLink::Enqueue fails them at once
      p.link->bytes += p.length;
      ++p.link->chunks;
      p.link->last = now;
    }
  }
  RecordingPlan RunDrains() {
    RecordingPlan plan;
    while (!drained.empty()) {
      FakeLink* l = drained.front();
      drained.erase(drained.begin());
      scheduler.Drained(l, now, plan);
    }
    Enqueue(plan);
    return plan;
  }
};

inline std::vector<FakeLink*> LinksOf(const RecordingPlan& plan) {
  std::vector<FakeLink*> out;
  for (const Placed& p : plan.placed)
    if (std::find(out.begin(), out.end(), p.link) == out.end()) out.push_back(p.link);
  return out;
}

inline TcpInitiatorOptions Options(uint64_t chunk_bytes = 1 << 20, uint32_t links_per_target = 2,
                            uint32_t max_links = 64) {
  TcpInitiatorOptions o;
  o.chunk_bytes = chunk_bytes;
  o.links_per_target = links_per_target;
  o.max_links = max_links;
  return o;
}

}  // namespace gdr::tcp_link_scheduler_test
