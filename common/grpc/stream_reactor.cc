#include "common/grpc/stream_reactor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/completion_batch.h"
#include "common/grpc/grpc_status.h"
#include "common/wire/stream_limits.h"

namespace gdr {

namespace v1 = gdrstore::v1;

StreamOpRequest OpOf(const v1::WriteRequest& request) {
  StreamOpRequest op;
  if (request.has_extent()) op.extent = &request.extent();
  if (request.has_buffer()) op.buffer = &request.buffer();
  op.crc = request.crc32c();
  return op;
}

StreamOpRequest OpOf(const v1::ReadRequest& request) {
  StreamOpRequest op;
  op.write = false;
  if (request.has_extent()) op.extent = &request.extent();
  if (request.has_buffer()) op.buffer = &request.buffer();
  op.sync = request.sync();
  op.crc = request.crc32c();
  return op;
}

StreamReactor::StreamReactor(std::unique_ptr<StreamHandler> handler, bool batch_answers)
    : handler_(std::move(handler)),
      batch_answers_(batch_answers),
      // The queue runs this under mu_, which every caller of the queue holds.
      writes_([this](std::deque<v1::StreamResult>& unsent) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                return StartWriteLocked(unsent);
              },
              [this](bool all_written) { Finish(grpc::Status::OK); }) {
  StartRead(&request_);
}

void StreamReactor::OnReadDone(bool ok) {
  if (!ok) {
    absl::MutexLock lock(&mu_);
    reads_done_ = true;
    MaybeFinishLocked();
    return;
  }
  // Answers given while the message is taken in (refusals) leave together, in one message,
  // when this batch closes, after the lock below is let go.
  std::optional<CompletionBatch> answers;
  if (batch_answers_) answers.emplace();
  handler_->BeginMessage();
  for (int i = 0; i < request_.ops_size(); ++i) {
    if (i >= kMaxOpsPerMessage) {
      Answer(request_.ops(i).id(),
             handler_->Refused(absl::InvalidArgumentError(absl::StrCat(
                 "more than ", kMaxOpsPerMessage, " ops in one StreamRequest; op not started"))),
             false);
      continue;
    }
    StartOne(request_.ops(i));
  }
  handler_->EndMessage(this);
  absl::MutexLock lock(&mu_);
  if (writes_.queued() >= handler_->QueueCap()) {
    read_paused_ = true;  // until the answers drain (OnWriteDone)
    return;
  }
  StartRead(&request_);
}

void StreamReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  // A failed write: the client is gone, nothing more can be delivered (the queue discards).
  writes_.OnWriteDone(ok);
  if (read_paused_ && (writes_.discarded() || writes_.queued() < handler_->QueueCap() / 2)) {
    read_paused_ = false;
    StartRead(&request_);
  }
  MaybeFinishLocked();
}

void StreamReactor::OnDone() { delete this; }

void StreamReactor::StartOne(const v1::StreamOp& op) {
  StreamOpRequest r;
  switch (op.op_case()) {
    case v1::StreamOp::kWrite:
      r = OpOf(op.write());
      break;
    case v1::StreamOp::kRead:
      r = OpOf(op.read());
      break;
    case v1::StreamOp::OP_NOT_SET:
      Answer(op.id(),
             handler_->Refused(absl::InvalidArgumentError("stream op has no write or read set")),
             false);
      return;
  }
  r.id = op.id();
  if (absl::Status s = handler_->Check(r); !s.ok()) {
    Answer(r.id, std::move(s), false);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = handler_->Room(inflight_ids_.size()); !s.ok()) {
      PushLocked(r.id, handler_->Refused(std::move(s)));
      return;
    }
    if (!inflight_ids_.insert(r.id).second) {
      PushLocked(r.id, handler_->Refused(absl::InvalidArgumentError(absl::StrCat(
                           "stream op id ", r.id, " is already in flight on this stream"))));
      return;
    }
  }
  // May answer inline (a refusal), so no lock is held here.
  handler_->Start(r, this);
}

void StreamReactor::Finished(uint64_t id, StreamAnswer answer) {
  Answer(id, std::move(answer), true);
}

void StreamReactor::Answer(uint64_t id, StreamAnswer answer, bool was_inflight) {
  absl::MutexLock lock(&mu_);
  if (was_inflight) inflight_ids_.erase(id);
  PushLocked(id, std::move(answer));
  MaybeFinishLocked();
}

void StreamReactor::PushLocked(uint64_t id, StreamAnswer answer) {
  if (writes_.discarded()) return;
  v1::StreamResult r;
  r.set_id(id);
  r.set_code(static_cast<int32_t>(answer.status.code()));
  if (!answer.status.ok()) r.set_message(std::string(answer.status.message()));
  if (IsNotAdmitted(answer.status)) r.set_not_admitted(true);
  r.set_bytes(answer.bytes);
  r.set_service_ns(answer.service_ns);
  r.set_synced(answer.synced);
  if (answer.crc32c) r.set_crc32c(*answer.crc32c);
  r.set_path(std::move(answer.path));  // a client puts its own hop before it
  if (!answer.data.empty()) r.set_data(std::move(answer.data));
  writes_.Enqueue(std::move(r));
  if (writes_.writing() || flush_deferred_) return;  // the answer rides the next message
  if (batch_answers_ && CompletionBatch::Defer(this, [this] {
        absl::MutexLock lock(&mu_);
        flush_deferred_ = false;
        writes_.Flush();
        MaybeFinishLocked();
      })) {
    flush_deferred_ = true;
    return;
  }
  writes_.Flush();
}

size_t StreamReactor::StartWriteLocked(std::deque<v1::StreamResult>& unsent) {
  out_.Clear();
  const size_t most = std::min<size_t>(unsent.size(), kMaxOpsPerMessage);
  out_.mutable_results()->Reserve(static_cast<int>(most));
  // Answers carrying inline bytes fill a message by bytes too (at least one answer a message).
  size_t n = 0, inline_bytes = 0;
  while (n < most &&
         (n == 0 || inline_bytes + unsent[n].data().size() <= kMaxInlineBytesPerMessage)) {
    inline_bytes += unsent[n].data().size();
    *out_.add_results() = std::move(unsent[n++]);
  }
  StartWrite(&out_);
  return n;
}

void StreamReactor::MaybeFinishLocked() {
  if (!reads_done_ || !inflight_ids_.empty() || flush_deferred_) return;
  writes_.EndWhenDrained();
}

}  // namespace gdr
