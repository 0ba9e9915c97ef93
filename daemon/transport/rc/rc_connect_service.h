// rc's Connect RPC: each call says hello with the client's QPs, gets the daemon's QPs back
// (RcAccept), and then stays open for the connection's life to relay QP resets. The call's end,
// whatever caused it, closes the connection and frees its QPs.
#pragma once

#include "daemon/transport/connect_handler.h"
#include "daemon/transport/rc/rc_initiator.h"

namespace gdr {

class RcConnectService final : public ConnectHandler {
 public:
  // `rc` must outlive the service and every call it opened.
  explicit RcConnectService(RcInitiator* rc) : rc_(rc) {}
  grpc::ServerBidiReactor<gdrstore::v1::ConnectRequest, gdrstore::v1::ConnectResponse>* Open(
      grpc::CallbackServerContext* ctx) override;

 private:
  RcInitiator* const rc_;
};

}  // namespace gdr
