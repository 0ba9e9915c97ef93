// Hands each validated op to the initiator of its transport (the endpoint kind of its
// RemoteBuffer), so the service sees one Initiator whatever transports the daemon runs.
#pragma once

#include <vector>

#include "daemon/transport/initiator.h"

namespace gdr {

class TransportRouter final : public Initiator {
 public:
  // Any of the initiators may be null (transport not running); none is owned, all must
  // outlive the router.
  TransportRouter(Initiator* tcp, Initiator* rc, Initiator* dc) : tcp_(tcp), rc_(rc), dc_(dc) {}

  // UNIMPLEMENTED for a transport that is not running; otherwise the initiator's answer.
  absl::Status Submit(const TransferOp& op, OpDone done) override {
    Initiator* target = For(op.transport);
    if (target == nullptr) return NotRunning(op.transport);
    return target->Submit(op, std::move(done));
  }

  // Hands each transport its ops as one batch (so the tcp initiator still shares sends).
  void SubmitBatch(std::span<Submission> batch) override {
    if (batch.empty()) return;
    const TransportKind first = batch.front().op.transport;
    bool mixed = false;
    for (const Submission& s : batch) mixed |= s.op.transport != first;
    if (!mixed) {
      if (Initiator* target = For(first)) {
        target->SubmitBatch(batch);
      } else {
        for (Submission& s : batch) s.status = NotRunning(first);
      }
      return;
    }
    for (TransportKind kind : {TransportKind::kTcp, TransportKind::kRc, TransportKind::kDc}) {
      std::vector<size_t> index;
      std::vector<Submission> part;
      for (size_t i = 0; i < batch.size(); ++i) {
        if (batch[i].op.transport != kind) continue;
        index.push_back(i);
        part.push_back(std::move(batch[i]));
      }
      if (part.empty()) continue;
      if (Initiator* target = For(kind)) {
        target->SubmitBatch(part);
      } else {
        for (Submission& s : part) s.status = NotRunning(kind);
      }
      for (size_t j = 0; j < part.size(); ++j) batch[index[j]] = std::move(part[j]);
    }
  }

  // dc before rc: dc runs on rc's device and completion poller, which rc stops.
  void Shutdown() override {
    for (Initiator* i : {tcp_, dc_, rc_})
      if (i) i->Shutdown();
  }

 private:
  Initiator* For(TransportKind kind) const {
    switch (kind) {
      case TransportKind::kTcp: return tcp_;
      case TransportKind::kRc: return rc_;
      case TransportKind::kDc: return dc_;
    }
    return nullptr;
  }
  static absl::Status NotRunning(TransportKind kind) {
    const char* name = kind == TransportKind::kTcp ? "tcp" : kind == TransportKind::kRc ? "rc" : "dc";
    return absl::UnimplementedError(std::string("transport ") + name +
                                    " is not running on this daemon (see GetInfo)");
  }

  Initiator* tcp_;
  Initiator* rc_;
  Initiator* dc_;
};

}  // namespace gdr
