#include "daemon/transport/transport_set.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"

namespace gdr {

namespace v1 = gdrstore::v1;

TransportSet::TransportSet() {
  for (TransportKind k : kTransportKinds) absent_[Index(k)] = "not configured";
}

void TransportSet::Add(std::unique_ptr<Initiator> initiator) {
  const TransportKind kind = initiator->kind();
  slots_[Index(kind)] = std::move(initiator);
  order_.push_back(kind);
}

void TransportSet::SetAbsent(TransportKind kind, std::string why) {
  absent_[Index(kind)] = std::move(why);
}

OfferedTransports TransportSet::offered() const {
  OfferedTransports o;
  for (TransportKind k : order_) o.Add(k);
  return o;
}

absl::StatusOr<std::shared_ptr<const Destination>> TransportSet::ParseDestination(
    TransportKind kind, const v1::RemoteBuffer& buffer) const {
  const Initiator* i = Find(kind);
  if (i == nullptr) return NotRunning(kind);
  return i->ParseDestination(buffer);
}

std::string TransportSet::Names() const {
  std::vector<std::string> names;
  for (TransportKind k : order_) names.push_back(TransportName(k));
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

std::string TransportSet::Describe(TransportKind kind) const {
  const Initiator* i = Find(kind);
  return i != nullptr ? i->Describe() : absent_[Index(kind)];
}

absl::Status TransportSet::NotRunning(TransportKind kind) {
  return absl::UnimplementedError(absl::StrCat("transport ", TransportName(kind),
                                               " is not running on this daemon (see GetInfo)"));
}

absl::Status TransportSet::Submit(const TransferOp& op, OpDone done) {
  Initiator* target = Find(op.transport);
  if (target == nullptr) return NotRunning(op.transport);
  return target->Submit(op, std::move(done));
}

void TransportSet::SubmitBatch(std::span<Submission> batch) {
  if (batch.empty()) return;
  const TransportKind first = batch.front().op.transport;
  bool mixed = false;
  for (const Submission& s : batch) mixed |= s.op.transport != first;
  auto hand = [this](TransportKind kind, std::span<Submission> part) {
    if (Initiator* target = Find(kind)) {
      target->SubmitBatch(part);
    } else {
      for (Submission& s : part) s.status = NotRunning(kind);
    }
  };
  if (!mixed) {
    hand(first, batch);
    return;
  }
  for (TransportKind kind : kTransportKinds) {
    std::vector<size_t> index;
    std::vector<Submission> part;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i].op.transport != kind) continue;
      index.push_back(i);
      part.push_back(std::move(batch[i]));
    }
    if (part.empty()) continue;
    hand(kind, part);
    for (size_t j = 0; j < part.size(); ++j) batch[index[j]] = std::move(part[j]);
  }
}

absl::Status TransportSet::CheckHealth(absl::Duration max_stall) const {
  for (TransportKind k : order_) GDR_RETURN_IF_ERROR(Find(k)->CheckHealth(max_stall));
  if (rails_ != nullptr) GDR_RETURN_IF_ERROR(rails_->CheckHealth(max_stall));
  return absl::OkStatus();
}

void TransportSet::StartDrain() {
  for (TransportKind k : order_) Find(k)->StartDrain();
}

void TransportSet::Shutdown() {
  for (auto k = order_.rbegin(); k != order_.rend(); ++k) Find(*k)->Shutdown();
}

uint32_t TransportSet::clients() const {
  uint32_t n = 0;
  for (TransportKind k : order_) n += Find(k)->stats().clients;
  return n;
}

void TransportSet::FillInfo(v1::GetInfoResponse* info) const {
  for (TransportKind k : kTransportKinds) {
    v1::TransportInfo* t = info->add_transports();
    t->set_transport(ToProto(k));
    t->set_available(Find(k) != nullptr);
    t->set_detail(Describe(k));
  }
  if (rails_ != nullptr) rails_->FillInfo(info);
  for (TransportKind k : order_) Find(k)->FillInfo(info);
}

void TransportSet::FillStats(v1::GetStatsResponse* stats) const {
  for (TransportKind k : order_) {
    v1::TransportStats* entry = nullptr;
    for (v1::TransportStats& t : *stats->mutable_transports()) {
      if (t.transport() == ToProto(k)) entry = &t;
    }
    if (entry == nullptr) {
      entry = stats->add_transports();
      entry->set_transport(ToProto(k));
    }
    const InitiatorStats s = Find(k)->stats();
    v1::PoolStats* pool = entry->mutable_pool();
    pool->set_in_use(s.in_use);
    pool->set_capacity(s.capacity);
    pool->set_destinations(s.clients);
    pool->set_inflight_ops(s.in_flight);
    pool->set_errors(s.errors);
    pool->set_recoveries(s.recoveries);
    pool->set_waiting_ops(s.waiting);
    pool->set_handovers(s.handovers);
    Find(k)->FillStats(stats);
  }
  if (rails_ != nullptr) rails_->FillStats(stats);
}

}  // namespace gdr
