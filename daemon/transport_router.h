// Hands each validated op to the initiator of its transport (the endpoint kind of its
// RemoteBuffer), so the service sees one Initiator whatever transports the daemon runs.
#pragma once

#include "daemon/initiator.h"

namespace gdr {

class TransportRouter final : public Initiator {
 public:
  // Any of the initiators may be null (transport not running); none is owned, all must
  // outlive the router.
  TransportRouter(Initiator* tcp, Initiator* rc, Initiator* dc) : tcp_(tcp), rc_(rc), dc_(dc) {}

  // UNIMPLEMENTED for a transport that is not running; otherwise the initiator's answer.
  absl::Status Submit(const TransferOp& op, OpDone done) override {
    Initiator* target = nullptr;
    const char* name = "";
    switch (op.transport) {
      case TransportKind::kTcp: target = tcp_; name = "tcp"; break;
      case TransportKind::kRc: target = rc_; name = "rc"; break;
      case TransportKind::kDc: target = dc_; name = "dc"; break;
    }
    if (target == nullptr) {
      return absl::UnimplementedError(
          std::string("transport ") + name + " is not running on this daemon (see GetInfo)");
    }
    return target->Submit(op, std::move(done));
  }

  void Shutdown() override {
    for (Initiator* i : {tcp_, rc_, dc_})
      if (i) i->Shutdown();
  }

 private:
  Initiator* tcp_;
  Initiator* rc_;
  Initiator* dc_;
};

}  // namespace gdr
