// The server side of the Connect RPC, for a transport whose clients hold a control call open
// (rc: the QP exchange and QP resets). The service hands each call to it, so the service never
// names the transport.
#pragma once

#include <grpcpp/grpcpp.h>

#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {

class ConnectHandler {
 public:
  virtual ~ConnectHandler() = default;
  // The reactor that serves one Connect call. Thread-safe.
  virtual grpc::ServerBidiReactor<gdrstore::v1::ConnectRequest, gdrstore::v1::ConnectResponse>*
  Open(grpc::CallbackServerContext* ctx) = 0;
};

}  // namespace gdr
