// Client's op submission path: SubmitAsync (options, ownership, slicing, the admission window)
// down to SubmitOne's unary Write/Read call, and the blocking Write/Read and future forms on it.
#include <grpcpp/grpcpp.h>

#include <future>
#include <memory>

#include "client/src/client_access.h"
#include "client/src/client_calls.h"
#include "client/src/daemon_rpc.h"
#include "client/src/inline_answer.h"
#include "client/src/op_request.h"
#include "common/grpc/grpc_status.h"
#include "gdrstore/client.h"

namespace gdrstore {

namespace {
absl::Status ClientGone() {
  return absl::FailedPreconditionError("the Client was closed before the op was sent");
}
}  // namespace

void Client::SubmitAsync(OpKind kind, const Extent& extent, const Buffer& buffer,
                         size_t buffer_offset, OpCallback done, const OpOptions& options) {
  if (!gdr::ClientAccess::ApplyOptions(options, &kind, done)) return;
  if (!gdr::ClientAccess::RefuseForeign(*this, buffer, done)) return;
  const bool crc = options.crc32c.value_or(options_.crc32c);
  // The piece may run again from an answer (a slice resent on another rail), and the window
  // may send it later from another thread: the Client may be gone by then, so each reaches it
  // through a use.
  gdr::ClientAccess::Dispatch(
      *this, extent, buffer, buffer_offset, crc, buffer.Track(kind, std::move(done)),
      [this, calls = calls_, kind, crc, &buffer, deadline = DeadlineOf(options)](
          const Extent& e, size_t offset, int rail, OpCallback cb) {
        gdr::ClientCalls::Use use(*calls);
        if (!use) {
          cb(ClientGone());
          return;
        }
        Admit(nullptr, e.length, deadline,
              [this, calls, kind, crc, &buffer, e, offset, rail](
                  std::chrono::system_clock::time_point dl, OpCallback sent) {
                gdr::ClientCalls::Use send_use(*calls);
                if (!send_use) {
                  sent(ClientGone());
                  return;
                }
                SubmitOne(kind, e, buffer, offset, rail, crc, dl, std::move(sent));
              },
              std::move(cb));
      });
}

void Client::SubmitOne(OpKind kind, const Extent& extent, const Buffer& buffer,
                       size_t buffer_offset, int rail, bool crc32c,
                       std::chrono::system_clock::time_point deadline, OpCallback done) {
  struct Call {
    grpc::ClientContext ctx;
    v1::WriteRequest write;
    v1::ReadRequest read;
    v1::OpResponse response;
    OpCallback done;
  };
  // Shared with the Client's list of calls, which cancels it if the Client goes first.
  auto call = std::make_shared<Call>();
  call->done = std::move(done);
  absl::Status s =
      kind == OpKind::kWrite
          ? gdr::FillRequest(*this, extent, buffer, buffer_offset, rail, crc32c, &call->write)
          : gdr::FillRequest(*this, extent, buffer, buffer_offset, rail, crc32c, &call->read);
  call->read.set_sync(kind == OpKind::kReadSync);
  // Small unary Writes are answered inline where the transport takes that (tcp): the bytes come
  // back in the answer rather than over a link (TakeInlineAnswer below). Not on a Stream: there
  // every op's completion and bytes would run on the daemon's one reader thread of the stream
  // and through its HTTP/2 window, measured 44.5k -> 32-34k 4 KiB ops/s at qd 32
  // (docs/benchmarks.md, issue 45).
  bool asked_inline = false;
  if (s.ok() && kind == OpKind::kWrite && call->write.buffer().has_tcp()) {
    if (const uint32_t most = transport_->inline_max(); most != 0) {
      call->write.mutable_buffer()->mutable_tcp()->set_inline_max(most);
      asked_inline = true;
    }
  }
  const std::shared_ptr<grpc::ClientContext> ctx(call, &call->ctx);
  if (s.ok() && !calls_->AddUnary(ctx)) {
    s = absl::CancelledError("the Client was closed before the op was sent");
  }
  if (!s.ok()) {
    OpCallback cb = std::move(call->done);
    cb(s);
    return;
  }
  if (deadline != std::chrono::system_clock::time_point::max()) call->ctx.set_deadline(deadline);
  // The buffer outlives the call: its destructor waits for the ops submitted on it.
  auto on_done = [call, calls = calls_, &buffer, buffer_offset, length = extent.length,
                  asked_inline](grpc::Status st) {
    absl::StatusOr<OpResult> result;
    if (st.ok()) {
      result = OpResult{call->response.bytes(), call->response.service_ns(),
                        call->response.synced(), std::nullopt, call->response.path()};
      if (call->response.has_crc32c()) result->crc32c = call->response.crc32c();
      if (!call->response.data().empty()) {
        if (absl::Status s = gdr::TakeInlineAnswer(buffer, buffer_offset, length, asked_inline,
                                                   call->response.data());
            !s.ok()) {
          result = s;
        }
      }
    } else {
      result = FromGrpcStatus(st);
      const auto& trailers = call->ctx.GetServerTrailingMetadata();
      if (auto it = trailers.find(gdr::kNotAdmittedKey);
          it != trailers.end() && it->second == "1") {
        result = gdr::MarkNotAdmitted(result.status());
      }
    }
    calls->RemoveUnary(&call->ctx);
    OpCallback cb = std::move(call->done);
    cb(std::move(result));
  };
  if (kind == OpKind::kWrite) {
    rpc_->stub->async()->Write(&call->ctx, &call->write, &call->response, std::move(on_done));
  } else {
    rpc_->stub->async()->Read(&call->ctx, &call->read, &call->response, std::move(on_done));
  }
}

std::future<absl::StatusOr<OpResult>> Client::SubmitAsync(OpKind kind, const Extent& extent,
                                                          const Buffer& buffer,
                                                          size_t buffer_offset,
                                                          const OpOptions& options) {
  auto promise = std::make_shared<std::promise<absl::StatusOr<OpResult>>>();
  auto future = promise->get_future();
  SubmitAsync(
      kind, extent, buffer, buffer_offset,
      [promise](absl::StatusOr<OpResult> r) { promise->set_value(std::move(r)); }, options);
  return future;
}

absl::StatusOr<OpResult> Client::Write(const Extent& extent, const Buffer& buffer,
                                       size_t buffer_offset, const OpOptions& options) {
  return SubmitAsync(OpKind::kWrite, extent, buffer, buffer_offset, options).get();
}

absl::StatusOr<OpResult> Client::Read(const Extent& extent, const Buffer& buffer,
                                      size_t buffer_offset, const OpOptions& options) {
  return SubmitAsync(OpKind::kRead, extent, buffer, buffer_offset, options).get();
}

}  // namespace gdrstore
