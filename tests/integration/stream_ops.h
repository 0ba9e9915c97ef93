// Drives a raw Stream call one op at a time for tests that need to hand-craft ops: each op goes
// in its own StreamRequest, and results are handed out one by one whatever the daemon's
// batching of answers.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>

#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr::integ {

class RawStream {
 public:
  using Call = grpc::ClientReaderWriter<gdrstore::v1::StreamRequest, gdrstore::v1::StreamResponse>;
  explicit RawStream(Call* call) : call_(call) {}

  bool Send(const gdrstore::v1::StreamOp& op) {
    gdrstore::v1::StreamRequest req;
    *req.add_ops() = op;
    return call_->Write(req);
  }

  // The next result; false when the call has ended.
  bool Next(gdrstore::v1::StreamResult* out) {
    while (buffered_.empty()) {
      gdrstore::v1::StreamResponse resp;
      if (!call_->Read(&resp)) return false;
      for (auto& r : *resp.mutable_results()) buffered_.push_back(std::move(r));
    }
    *out = std::move(buffered_.front());
    buffered_.pop_front();
    return true;
  }

 private:
  Call* call_;
  std::deque<gdrstore::v1::StreamResult> buffered_;
};

}  // namespace gdr::integ
