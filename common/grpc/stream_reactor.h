// The Stream RPC's server reactor, which gdrstored and gdragent share: request messages read
// back to back, every op of them started through what the side does with an op (its
// StreamHandler), answers in completion order, many to a message, and the call finished once
// the client has closed its side and every op is answered.
#pragma once

#include <cstddef>
#include <deque>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/write_queue.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"

namespace gdr {

// One data op (a Write or Read call, or an op of a StreamRequest) as both sides read it; the
// pointers are into the request message, valid until the callback that carries it returns.
struct StreamOpRequest {
  uint64_t id = 0;
  bool write = true;  // a WriteOp (store -> client); false: a ReadOp (client -> store)
  const gdrstore::v1::Extent* extent = nullptr;        // null: the op has none
  const gdrstore::v1::RemoteBuffer* buffer = nullptr;  // null: the op has none
  bool sync = false;                                   // ReadOp.sync
  bool crc = false;                                    // crc32c asked for
};

// The op a WriteRequest or ReadRequest describes (id 0): a unary call's, or a Stream op's.
StreamOpRequest OpOf(const gdrstore::v1::WriteRequest& request);
StreamOpRequest OpOf(const gdrstore::v1::ReadRequest& request);

// One op's answer. A failed status carries its code, message and not-admitted mark.
struct StreamAnswer {
  StreamAnswer() = default;
  // An op that moved nothing: refused or failed (or OK, for a test).
  StreamAnswer(absl::Status s) : status(std::move(s)) {}  // NOLINT: implicit by design

  absl::Status status;
  uint64_t bytes = 0;
  uint64_t service_ns = 0;
  bool synced = false;
  std::optional<uint32_t> crc32c;
  std::string path;  // the hops the op took (the agent's; empty from the daemon)
  std::string data;  // a Write answered inline (StreamResult.data); empty otherwise
};

class StreamReactor;

// What one side does with the ops of one Stream call. Owned by its reactor and destroyed when
// the call is over (OnDone). BeginMessage, Check, Start and EndMessage run in the read
// callbacks, which never overlap; Refused and Room also run under the reactor's lock, so they
// must not call back into it.
class StreamHandler {
 public:
  virtual ~StreamHandler() = default;

  // Counts and words a refusal the reactor answers itself (too many ops in one message, an op
  // with neither write nor read, an id already in flight, no Room) and returns the answer.
  virtual absl::Status Refused(absl::Status status) = 0;
  // Before the ops of one request message.
  virtual void BeginMessage() {}
  // Checks one op before it takes a place in flight: a non-OK status (counted already) is the
  // op's answer.
  virtual absl::Status Check(const StreamOpRequest& op) { return absl::OkStatus(); }
  // OK when one more op may join the `inflight` ones in flight; else the refusal (Refused).
  virtual absl::Status Room(size_t inflight) { return absl::OkStatus(); }
  // Starts an op that holds a place in flight. It ends with exactly one
  // reactor->Finished(op.id, ...), from any thread, inline included.
  virtual void Start(const StreamOpRequest& op, StreamReactor* reactor) = 0;
  // After the last op of the message.
  virtual void EndMessage(StreamReactor* reactor) {}
  // Answers queued past which the reactor stops reading (a client that sends but does not
  // read its answers must not grow the queue without bound); reading resumes below half.
  virtual size_t QueueCap() const = 0;
};

// One Stream call. Exactly one write is outstanding at a time (a WriteQueue under mu_);
// answers accumulate meanwhile and go out together in the next StreamResponse. Deletes itself
// in OnDone.
class StreamReactor final
    : public grpc::ServerBidiReactor<gdrstore::v1::StreamRequest, gdrstore::v1::StreamResponse> {
 public:
  // `batch_answers`: answers given in one burst on a thread inside a CompletionBatch (a link
  // receiver draining its buffer, a poller's batch of CQEs, the read callback itself) start at
  // most one write, when the burst ends. Starts reading at once.
  StreamReactor(std::unique_ptr<StreamHandler> handler, bool batch_answers);

  // The end of an op Start began: its answer joins the queue and its id leaves the in-flight
  // set. Thread-safe; exactly once per started op.
  void Finished(uint64_t id, StreamAnswer answer);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  void StartOne(const gdrstore::v1::StreamOp& op);
  void Answer(uint64_t id, StreamAnswer answer, bool was_inflight);
  void PushLocked(uint64_t id, StreamAnswer answer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Packs the answers ready so far, up to a message's worth, into out_ and writes it.
  size_t StartWriteLocked(std::deque<gdrstore::v1::StreamResult>& unsent)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once the client has closed its side and every op is answered, the call finishes as soon
  // as the last answer is written.
  void MaybeFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<StreamHandler> handler_;
  const bool batch_answers_;
  gdrstore::v1::StreamRequest request_;  // touched only by the read callbacks
  absl::Mutex mu_;
  gdrstore::v1::StreamResponse out_ ABSL_GUARDED_BY(mu_);  // the message being written
  // Answers not yet in a message; discarded once a write failed (the client is gone).
  WriteQueue<gdrstore::v1::StreamResult> writes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> inflight_ids_ ABSL_GUARDED_BY(mu_);
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  // A CompletionBatch holds a flush of this stream: it must not finish (and be deleted) first.
  bool flush_deferred_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace gdr
