// One tcp connection from the daemon to a client's target: the tcp transport's stand-in for a
// QP. Request frames go out in order, written either by the submitting thread (when the link is
// idle and the payload small, with a non-blocking send, so small ops skip a thread hop; never
// under the pool's lock) or by the link's sender thread, which also connects, carries bulk
// payloads (so links to different clients copy in parallel) and finishes whatever a
// non-blocking send left over. A
// receiver thread matches each response to the oldest outstanding request (targets answer in
// order). Many chunks are in flight at once; the socket buffers give back-pressure.
// Before any of that the link checks its target against the TcpTargetRule (every address the
// host resolves to; no connection at all when one is refused) and, once connected, has the
// target prove it holds the endpoint's secret (common/wire/tcp_proof.h): until then not one byte
// of the store leaves and none is taken into it.
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/base/socket.h"
#include "common/wire/tcp_frame.h"
#include "daemon/transport/initiator.h"
#include "daemon/transport/tcp/tcp_destination.h"
#include "daemon/transport/tcp/tcp_options.h"
#include "daemon/transport/tcp/tcp_target_rule.h"
#include "daemon/transport/transfer_op.h"

namespace gdr {

// Completion state shared by the chunks of one op; the first failure wins. The op counts in
// `in_flight` from construction until just before `done` runs.
class OpState {
 public:
  OpState(uint32_t chunks, OpDone done, std::atomic<uint64_t>* in_flight)
      : remaining_(chunks), done_(std::move(done)), in_flight_(in_flight) {
    in_flight_->fetch_add(1, std::memory_order_relaxed);
  }
  // Thread-safe; runs `done` when the last chunk reports.
  void ChunkDone(const absl::Status& status);

 private:
  std::atomic<uint32_t> remaining_;
  absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  OpDone done_;
  std::atomic<uint64_t>* const in_flight_;
};

struct Chunk {
  tcpwire::Opcode opcode = tcpwire::Opcode::kWriteReq;
  std::byte* local = nullptr;
  uint32_t length = 0;
  uint64_t remote_address = 0;
  uint32_t rkey = 0;
  std::shared_ptr<OpState> op;
  uint64_t tag = 0;  // assigned by the link
};

class TcpLink {
 public:
  // Starts the link's threads; resolving, checking `caller` against `rule`, connecting and the
  // proof happen on them, so this never blocks on the network. A refused target or a failed
  // proof fails the link (and its chunks) with PERMISSION_DENIED.
  TcpLink(TcpDestination dest, std::string caller, std::shared_ptr<const TcpTargetRule> rule,
          TcpLinkOptions options);
  // Fails what is left with CANCELLED and joins the threads.
  ~TcpLink();
  TcpLink(const TcpLink&) = delete;
  TcpLink& operator=(const TcpLink&) = delete;

  // Queues chunks for sending. On a dead link they fail at once with the link's error. True
  // when the calling thread took the send token: it must then call SendClaimed(), after
  // releasing any lock of its own, so no caller's lock is held across a socket write.
  [[nodiscard]] bool Enqueue(std::vector<Chunk> chunks);
  // Writes the batch Enqueue laid out without blocking; the sender thread finishes the rest.
  void SendClaimed();

  // The link takes no new work from now on (the pool stops planning on it): `on_drained` runs
  // once, on the thread that completes or fails its last outstanding chunk. True when nothing
  // is outstanding: the caller handles the drained link and `on_drained` never runs.
  bool Retire(std::function<void()> on_drained);

  // Fails every queued and in-flight chunk with `status` and closes the socket. Idempotent.
  void Fail(const absl::Status& status);

  // Fails the link with DEADLINE_EXCEEDED when it has had work but no response for `timeout`
  // (counted from the proof on; before it, `timeout` plus twice the connect timeout, the bounds
  // of connect and proof).
  void CheckStall(absl::Time now, absl::Duration timeout);

  bool dead() const { return dead_.load(std::memory_order_acquire); }
  // Why the link died (OK while alive); CANCELLED for closes the daemon chose (idle, evicted).
  absl::Status error() const;
  // How long the receiver (this link's completion poller) has been inside one op completion
  // callback; zero when it is not in one. Lock-free; for the watchdog's health probe.
  absl::Duration completion_busy_for() const;
  uint64_t outstanding_bytes() const { return outstanding_.load(std::memory_order_relaxed); }
  uint64_t outstanding_chunks() const { return chunks_out_.load(); }
  absl::Time opened_at() const { return opened_at_; }
  // When Retire() was called; meaningful only once it was.
  absl::Time retired_at() const { return absl::FromUnixNanos(retired_ns_.load()); }
  absl::Time last_activity() const;
  const TcpDestination& destination() const { return dest_; }

 private:
  void SendLoop();
  // Resolve, rule check, connect, proof; on success fd_/raw_fd_ are set. Sender thread.
  absl::Status Open();
  // Moves up to kMaxBatch pending chunks in flight and lays their frames out in send_iov_.
  // Caller holds mu_ and the send token (sending_).
  void BuildBatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReceiveLoop();
  // Polls the socket until it is readable or options_.poll_spin has passed.
  void SpinUntilReadable();
  absl::Status ReceiveOne(BufferedReader& reader);
  void Complete(Chunk& chunk, const absl::Status& status);
  void MaybeDrained();
  // Complete() on the receiver thread, with completion_busy_for() tracking it.
  void CompleteOnReceiver(Chunk& chunk, const absl::Status& status);

  const TcpDestination dest_;
  const std::string caller_;
  const std::shared_ptr<const TcpTargetRule> rule_;
  const TcpLinkOptions options_;
  std::atomic<bool> dead_{false};
  std::atomic<uint64_t> outstanding_{0};
  std::atomic<uint64_t> chunks_out_{0};  // chunks enqueued and not completed (any length)
  const absl::Time opened_at_ = absl::Now();
  std::function<void()> on_drained_;      // written once, before retired_ns_ is set
  std::atomic<int64_t> retired_ns_{0};    // when Retire() was called; 0: not retiring
  std::atomic<bool> drain_claimed_{false};
  std::atomic<int64_t> completing_since_ns_{0};  // 0: receiver not inside a completion

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  ScopedFd fd_ ABSL_GUARDED_BY(mu_);
  int raw_fd_ = -1;  // set once by the sender thread after connect, read by the receiver
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  uint64_t next_tag_ ABSL_GUARDED_BY(mu_) = 1;
  std::deque<Chunk> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<Chunk> inflight_ ABSL_GUARDED_BY(mu_);
  absl::Time last_progress_ ABSL_GUARDED_BY(mu_);
  bool connected_ ABSL_GUARDED_BY(mu_) = false;  // connected and proved
  // The send token: whoever sets it (an enqueuing thread or the sender thread) owns the
  // send_* members below and is the only writer to the socket until it clears it.
  bool sending_ ABSL_GUARDED_BY(mu_) = false;
  // A batch whose tail a non-blocking send could not write; the sender thread finishes it.
  bool has_carry_ ABSL_GUARDED_BY(mu_) = false;
  // Payload bytes queued in pending_ (write requests only).
  uint64_t pending_payload_ ABSL_GUARDED_BY(mu_) = 0;
  static constexpr size_t kMaxBatch = 32;
  // Payloads up to this go out from the enqueuing thread; larger ones from the sender thread.
  // A Stream's batch of 32 4 KiB ops (128 KiB) fits: waking the sender for it was one more
  // thread hop in the stream's loop (docs/benchmarks.md, issue 45).
  static constexpr uint64_t kInlinePayload = 128 << 10;
  static constexpr int kMaxBurst = 64;  // responses completed before deferred work runs
  std::array<std::array<std::byte, tcpwire::kHeaderSize>, kMaxBatch> send_headers_;
  std::array<struct iovec, 2 * kMaxBatch> send_iov_;
  int send_iov_begin_ = 0;
  int send_iov_end_ = 0;

  std::thread receiver_;  // started by the sender thread, joined after it
  std::thread sender_;
};

}  // namespace gdr
