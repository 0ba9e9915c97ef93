// A bidirectional call refused before it started (no credential, shutting down, no transport
// takes it): the reactor finishes at once with the reason and deletes itself when gRPC is done.
#pragma once

#include <grpcpp/grpcpp.h>

namespace gdr {

template <class Request, class Response>
class RefusedBidi final : public grpc::ServerBidiReactor<Request, Response> {
 public:
  explicit RefusedBidi(const grpc::Status& s) { this->Finish(s); }
  void OnDone() override { delete this; }
};

}  // namespace gdr
