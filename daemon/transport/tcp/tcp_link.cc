#include "daemon/transport/tcp/tcp_link.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <array>

#include "absl/strings/str_cat.h"
#include "common/base/completion_batch.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/wire/tcp_proof.h"
#include "common/base/thread_name.h"
#include "daemon/store/mapping_guard.h"

namespace gdr {

void OpState::ChunkDone(const absl::Status& status) {
  if (!status.ok()) {
    absl::MutexLock lock(&mu_);
    if (status_.ok()) status_ = status;
  }
  if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  absl::Status final_status;
  {
    absl::MutexLock lock(&mu_);
    final_status = status_;
  }
  OpDone done = std::move(done_);
  in_flight_->fetch_sub(1, std::memory_order_relaxed);
  done(std::move(final_status));
}

TcpLink::TcpLink(TcpDestination dest, std::string caller,
                 std::shared_ptr<const TcpTargetRule> rule, TcpLinkOptions options)
    : dest_(std::move(dest)), caller_(std::move(caller)), rule_(std::move(rule)),
      options_(options) {
  {
    absl::MutexLock lock(&mu_);
    last_progress_ = absl::Now();
  }
  sender_ = std::thread([this] {
    SetThreadName("gdr-tcp-send");
    SendLoop();
  });
}

TcpLink::~TcpLink() {
  Fail(absl::CancelledError(absl::StrCat("tcp link to ", dest_.Key(), " closed")));
  if (sender_.joinable()) sender_.join();
  if (receiver_.joinable()) receiver_.join();
}

absl::Time TcpLink::last_activity() const {
  absl::MutexLock lock(&mu_);
  return last_progress_;
}

bool TcpLink::Enqueue(std::vector<Chunk> chunks) {
  absl::Status failed;
  {
    absl::MutexLock lock(&mu_);
    if (closing_) {
      failed = error_;
    } else {
      if (pending_.empty() && inflight_.empty()) last_progress_ = absl::Now();
      for (Chunk& c : chunks) {
        c.tag = next_tag_++;
        outstanding_.fetch_add(c.length, std::memory_order_relaxed);
        chunks_out_.fetch_add(1);
        if (c.opcode == tcpwire::Opcode::kWriteReq) pending_payload_ += c.length;
        pending_.push_back(std::move(c));
      }
      // Bulk payloads go to the sender thread: a caller copying megabytes into a socket would
      // stall its own thread (a gRPC one) and serialise clients that share it.
      if (!connected_ || sending_ || has_carry_ || pending_payload_ > kInlinePayload) {
        cv_.Signal();
        return false;
      }
      sending_ = true;
      BuildBatchLocked();
      return true;
    }
  }
  for (Chunk& c : chunks) c.op->ChunkDone(failed);
  return false;
}

void TcpLink::SendClaimed() {
  // Idle link: write from this thread without blocking; leave any remainder to the sender.
  absl::Status s;
  while (send_iov_begin_ < send_iov_end_) {
    struct msghdr msg {};
    msg.msg_iov = &send_iov_[send_iov_begin_];
    msg.msg_iovlen = static_cast<size_t>(send_iov_end_ - send_iov_begin_);
    ssize_t w = ::sendmsg(raw_fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) s = absl::ErrnoToStatus(errno, "sendmsg");
      break;
    }
    send_iov_begin_ += AdvanceIovecs(&send_iov_[send_iov_begin_], send_iov_end_ - send_iov_begin_,
                                     static_cast<size_t>(w));
  }
  {
    absl::MutexLock lock(&mu_);
    sending_ = false;
    if (s.ok()) {
      has_carry_ = send_iov_begin_ < send_iov_end_;
      if (has_carry_ || !pending_.empty()) cv_.Signal();
      return;
    }
  }
  Fail(absl::UnavailableError(absl::StrCat("tcp link to ", dest_.Key(), " lost: ", s.message())));
}

bool TcpLink::Retire(std::function<void()> on_drained) {
  on_drained_ = std::move(on_drained);
  retired_ns_.store(absl::GetCurrentTimeNanos());
  // Whoever sees both "retiring" and "nothing outstanding" first takes the drain: this call or
  // the completion of the last chunk (MaybeDrained), never both.
  return chunks_out_.load() == 0 && !drain_claimed_.exchange(true);
}

void TcpLink::MaybeDrained() {
  if (retired_ns_.load() != 0 && chunks_out_.load() == 0 && !drain_claimed_.exchange(true)) {
    on_drained_();
  }
}

void TcpLink::BuildBatchLocked() {
  size_t n = 0;
  int iovcnt = 0;
  while (n < kMaxBatch && !pending_.empty()) {
    Chunk& c = pending_.front();
    tcpwire::Header h;
    h.opcode = c.opcode;
    h.rkey = c.rkey;
    h.length = c.length;
    h.address = c.remote_address;
    h.tag = c.tag;
    tcpwire::Encode(h, send_headers_[n]);
    send_iov_[iovcnt++] = {send_headers_[n].data(), tcpwire::kHeaderSize};
    if (c.opcode == tcpwire::Opcode::kWriteReq) {
      send_iov_[iovcnt++] = {c.local, c.length};
      pending_payload_ -= c.length;
    }
    // In flight before it is on the wire, so the receiver always finds it.
    inflight_.push_back(std::move(c));
    pending_.pop_front();
    ++n;
  }
  send_iov_begin_ = 0;
  send_iov_end_ = iovcnt;
}

absl::Duration TcpLink::completion_busy_for() const {
  const int64_t since = completing_since_ns_.load(std::memory_order_relaxed);
  return since == 0 ? absl::ZeroDuration() : absl::Nanoseconds(absl::GetCurrentTimeNanos() - since);
}

void TcpLink::CompleteOnReceiver(Chunk& chunk, const absl::Status& status) {
  completing_since_ns_.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed);
  Complete(chunk, status);
  completing_since_ns_.store(0, std::memory_order_relaxed);
}

void TcpLink::Complete(Chunk& chunk, const absl::Status& status) {
  outstanding_.fetch_sub(chunk.length, std::memory_order_relaxed);
  chunks_out_.fetch_sub(1);
  chunk.op->ChunkDone(status);
  MaybeDrained();
}

absl::Status TcpLink::error() const {
  absl::MutexLock lock(&mu_);
  return error_;
}

void TcpLink::Fail(const absl::Status& status) {
  std::deque<Chunk> pending, inflight;
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return;
    closing_ = true;
    error_ = status;
    dead_.store(true, std::memory_order_release);
    pending.swap(pending_);
    inflight.swap(inflight_);
    pending_payload_ = 0;
    // Wake both threads; the fd itself is closed only after they are joined.
    if (fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
    cv_.SignalAll();
  }
  if (!absl::IsCancelled(status) && (!pending.empty() || !inflight.empty())) {
    GDR_LOG_EVERY_N_SEC(kWarning, 1) << "tcp link to " << dest_.Key() << " failed with "
                                     << inflight.size() + pending.size()
                                     << " chunks outstanding: " << status;
  }
  for (Chunk& c : inflight) Complete(c, status);
  for (Chunk& c : pending) Complete(c, status);
}

void TcpLink::CheckStall(absl::Time now, absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    if (closing_ || (pending_.empty() && inflight_.empty())) return;
    // Before the proof, connect and proof are bounded on their own (each by the connect
    // timeout, failing with their own status); this catches only a lookup that hangs.
    const absl::Duration limit = connected_ ? timeout : timeout + 2 * options_.connect_timeout;
    if (now - last_progress_ < limit) return;
  }
  Fail(absl::DeadlineExceededError(absl::StrCat("tcp target ", dest_.Key(),
                                                " did not answer within ",
                                                absl::FormatDuration(timeout))));
}

absl::Status TcpLink::Open() {
  const std::string who = dest_.Key();
  absl::StatusOr<std::vector<SocketAddress>> addresses = ResolveTcp(dest_.host, dest_.port);
  if (!addresses.ok()) return addresses.status();
  // Every address checked, then exactly those connected to: no second lookup that could
  // answer differently.
  GDR_RETURN_IF_ERROR(rule_->CheckAll(caller_, who, *addresses));
  absl::StatusOr<ScopedFd> fd = ConnectTcp(*addresses, who, options_.connect_timeout);
  if (!fd.ok()) return fd.status();
  SetSocketBuffers(fd->get(), options_.socket_buffer_bytes);
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return error_;  // failed or destroyed while connecting; *fd closes here
    fd_ = std::move(*fd);
    raw_fd_ = fd_.get();
  }
  // A Fail() from now on shuts the socket down, which ends the proof's waits at once.
  return tcpwire::ProveTarget(raw_fd_, dest_.secret, absl::Now() + options_.connect_timeout,
                              who);
}

void TcpLink::SendLoop() {
  if (absl::Status s = Open(); !s.ok()) {
    Fail(s);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return;
    connected_ = true;
    last_progress_ = absl::Now();  // the op timeout runs from here
  }
  receiver_ = std::thread([this] {
    SetThreadName("gdr-tcp-recv");
    ReceiveLoop();
  });
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      while (!closing_ && (sending_ || (!has_carry_ && pending_.empty()))) cv_.Wait(&mu_);
      if (closing_) return;
      sending_ = true;
      if (!has_carry_) BuildBatchLocked();
      has_carry_ = false;
    }
    absl::Status s = WriteFullV(raw_fd_, &send_iov_[send_iov_begin_],
                                send_iov_end_ - send_iov_begin_);
    send_iov_begin_ = send_iov_end_;
    {
      absl::MutexLock lock(&mu_);
      sending_ = false;
    }
    if (!s.ok()) {
      Fail(absl::UnavailableError(absl::StrCat("tcp link to ", dest_.Key(), " lost: ",
                                               s.message())));
      return;
    }
  }
}

void TcpLink::ReceiveLoop() {
  BufferedReader reader(raw_fd_);
  for (;;) {
    absl::Status s;
    {
      // Responses that arrived together complete as one burst: work their completions defer
      // (a stream's next response message) runs once, before the next read that may block.
      CompletionBatch burst;
      int frames = 0;
      do {
        s = ReceiveOne(reader);
      } while (s.ok() && reader.HasBuffered() && ++frames < kMaxBurst);
    }
    if (!s.ok()) {
      Fail(s);
      return;
    }
    if (options_.poll_spin > absl::ZeroDuration() && chunks_out_.load() != 0) SpinUntilReadable();
  }
}

void TcpLink::SpinUntilReadable() {
  const int64_t until = absl::GetCurrentTimeNanos() + absl::ToInt64Nanoseconds(options_.poll_spin);
  struct pollfd p = {raw_fd_, POLLIN, 0};
  while (::poll(&p, 1, 0) == 0 && absl::GetCurrentTimeNanos() < until) {
  }
}

absl::Status TcpLink::ReceiveOne(BufferedReader& reader) {
  std::array<std::byte, tcpwire::kHeaderSize> raw;
  absl::Status s = reader.Read(raw.data(), raw.size());
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat("tcp link to ", dest_.Key(), " lost: ",
                                               s.message()));
  }
  absl::StatusOr<tcpwire::Header> h = tcpwire::Decode(raw, options_.max_chunk_bytes);
  if (!h.ok()) {
    return absl::UnavailableError(absl::StrCat("tcp target ", dest_.Key(),
                                               " sent a bad frame: ", h.status().message()));
  }
  Chunk chunk;
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return error_;
    if (inflight_.empty()) {
      return absl::UnavailableError(
          absl::StrCat("tcp target ", dest_.Key(), " answered a request that was never sent"));
    }
    const Chunk& head = inflight_.front();
    const auto want = head.opcode == tcpwire::Opcode::kWriteReq ? tcpwire::Opcode::kWriteAck
                                                               : tcpwire::Opcode::kReadData;
    if (h->tag != head.tag || h->opcode != want || h->length != head.length) {
      return absl::UnavailableError(absl::StrCat(
          "tcp target ", dest_.Key(), " answered out of order (tag ", h->tag, ", expected ",
          head.tag, ")"));
    }
    chunk = std::move(inflight_.front());
    inflight_.pop_front();
    last_progress_ = absl::Now();
  }
  // The chunk is ours now: a concurrent Fail no longer sees it.
  if (h->status != tcpwire::TargetStatus::kOk) {
    CompleteOnReceiver(chunk, tcpwire::TargetStatusToStatus(*h));
    return absl::OkStatus();
  }
  if (h->opcode == tcpwire::Opcode::kReadData) {
    // Into the volume's mapping: a file volume whose file was truncated under it faults here
    // (SIGBUS, from the reader's copy out of its buffer) rather than in recv (EFAULT). The
    // op fails naming the file; where the stream stopped is unknown, so the link goes too.
    std::optional<const void*> fault =
        RunGuarded([&reader, &chunk, &s] { s = reader.Read(chunk.local, chunk.length); });
    if (fault) {
      const absl::Status lost = MappingFaultStatus(*fault);
      CompleteOnReceiver(chunk, lost);
      return absl::UnavailableError(absl::StrCat("tcp link to ", dest_.Key(),
                                                 " dropped mid-payload: ", lost.message()));
    }
    if (!s.ok()) {
      absl::Status lost = absl::UnavailableError(
          absl::StrCat("tcp link to ", dest_.Key(), " lost mid-payload: ", s.message()));
      CompleteOnReceiver(chunk, lost);
      return lost;
    }
  }
  CompleteOnReceiver(chunk, absl::OkStatus());
  return absl::OkStatus();
}

}  // namespace gdr
