#include "client/src/transport/tcp/tcp_target.h"

#include <poll.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/uio.h>

#include <array>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/wire/tcp_proof.h"
#include "common/base/thread_name.h"

namespace gdr {

namespace wire = tcpwire;

absl::StatusOr<std::shared_ptr<TcpTarget>> TcpTarget::Start(const std::string& bind_host,
                                                            uint16_t port,
                                                            uint32_t max_connections,
                                                            GpuStagingOptions staging) {
  std::shared_ptr<TcpTarget> t(new TcpTarget());
  absl::StatusOr<ScopedFd> fd = ListenTcp(bind_host, port, 128, &t->port_);
  if (!fd.ok()) {
    return absl::UnavailableError(absl::StrCat("tcp target cannot listen on ", bind_host, ":",
                                               port, ": ", fd.status().message()));
  }
  absl::StatusOr<std::string> secret = wire::NewSecret();
  if (!secret.ok()) return secret.status();
  t->secret_ = *std::move(secret);
  t->listen_fd_ = std::move(*fd);
  t->max_connections_ = max_connections;
  t->staging_ = staging;
  t->pipes_ = std::make_unique<StagingPool<cuda::StagingPipe>>([staging](int ordinal) {
    return cuda::StagingPipe::Create(ordinal, staging.slot_bytes, staging.slots);
  });
  std::random_device rd;
  t->rng_.seed((uint64_t{rd()} << 32) ^ rd());
  t->acceptor_ = std::thread([raw = t.get()] {
    SetThreadName("gdr-target-acc");
    raw->AcceptLoop();
  });
  return t;
}

TcpTarget::~TcpTarget() { Stop(); }

void TcpTarget::Stop() {
  std::list<std::unique_ptr<Connection>> conns;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    // shutdown() wakes accept() and every recv(); the fds close after the joins.
    ::shutdown(listen_fd_.get(), SHUT_RDWR);
    for (auto& c : connections_) ::shutdown(c->fd.get(), SHUT_RDWR);
  }
  if (acceptor_.joinable()) acceptor_.join();
  {
    absl::MutexLock lock(&mu_);
    conns.swap(connections_);
    for (auto& c : conns) ::shutdown(c->fd.get(), SHUT_RDWR);
  }
  for (auto& c : conns)
    if (c->thread.joinable()) c->thread.join();
}

void TcpTarget::Register(const std::shared_ptr<Region>& region) {
  absl::ReleasableMutexLock lock(&regions_mu_);
  uint32_t rkey = 0;
  do {
    rkey = static_cast<uint32_t>(rng_());
  } while (rkey == 0 || regions_.contains(rkey));
  region->rkey = rkey;
  regions_.emplace(rkey, region);
  lock.Release();
  if (region->gpu != nullptr) {
    if (absl::Status s = pipes_->Prewarm(region->gpu->ordinal(), staging_.prewarm); !s.ok()) {
      GDR_LOG_EVERY_N_SEC(kWarning, 10) << "tcp target: staging for GPU "
                                        << region->gpu->ordinal()
                                        << " is made at the first write instead: "
                                        << s.message();
    }
  }
}

void TcpTarget::Deregister(uint32_t rkey) {
  std::shared_ptr<Region> victim;  // released outside the lock
  absl::MutexLock lock(&regions_mu_);
  auto it = regions_.find(rkey);
  if (it == regions_.end()) return;
  victim = std::move(it->second);
  regions_.erase(it);
}

std::shared_ptr<Region> TcpTarget::Lookup(uint32_t rkey) const {
  absl::ReaderMutexLock lock(&regions_mu_);
  auto it = regions_.find(rkey);
  return it == regions_.end() ? nullptr : it->second;
}

TcpTargetStats TcpTarget::stats() const {
  TcpTargetStats s;
  s.refused = refused_.load();
  s.bad_frames = bad_frames_.load();
  s.accepted = accepted_.load();
  s.gpu.bytes_to_device = gpu_to_device_.load();
  s.gpu.bytes_from_device = gpu_from_device_.load();
  s.gpu.copy_ns = gpu_copy_ns_.load();
  s.gpu.wait_ns = gpu_wait_ns_.load();
  absl::MutexLock lock(&mu_);
  for (const auto& c : connections_)
    if (!c->finished.load()) ++s.connections;
  return s;
}

wire::TargetStatus TcpTarget::Check(const Region* region, const wire::Header& h) const {
  if (region == nullptr) return wire::TargetStatus::kBadRkey;
  if (h.address < region->base || h.length > region->size ||
      h.address - region->base > region->size - h.length) {
    return wire::TargetStatus::kOutOfBounds;
  }
  if (h.opcode == wire::Opcode::kWriteReq && !region->writable) {
    return wire::TargetStatus::kAccessDenied;
  }
  return wire::TargetStatus::kOk;
}

void TcpTarget::ReapFinishedLocked() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if ((*it)->finished.load()) {
      (*it)->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void TcpTarget::AcceptLoop() {
  for (;;) {
    int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      if (errno == EMFILE || errno == ENFILE) {
        GDR_LOG_EVERY_N_SEC(kWarning, 5) << "tcp target: accept: " << strerror(errno);
        mu_.AwaitWithTimeout(absl::Condition(&stopped_), absl::Milliseconds(100));
        continue;
      }
      GDR_LOG(kError) << "tcp target: accept failed: " << strerror(errno);
      return;
    }
    ScopedFd owned(fd);
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    ReapFinishedLocked();
    // Connections are kept in accept order, so the first unproven one is the oldest.
    size_t live = 0, unproven = 0;
    Connection* oldest = nullptr;
    for (const auto& c : connections_) {
      if (c->dropped || c->finished.load()) continue;
      ++live;
      if (c->proven.load()) continue;
      if (oldest == nullptr) oldest = c.get();
      ++unproven;
    }
    if (oldest != nullptr && (unproven >= kMaxUnproven || live >= max_connections_)) {
      GDR_LOG_EVERY_N_SEC(kWarning, 5)
          << "tcp target: " << unproven
          << " connections have not answered the challenge; dropping the oldest";
      ::shutdown(oldest->fd.get(), SHUT_RDWR);  // its thread's challenge read fails and ends it
      oldest->dropped = true;
      --live;
    }
    if (live >= max_connections_) {
      GDR_LOG_EVERY_N_SEC(kWarning, 5)
          << "tcp target: refusing a connection, " << max_connections_ << " already open";
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    SetSocketBuffers(fd, 4 << 20);
    auto conn = std::make_unique<Connection>();
    conn->fd = std::move(owned);
    Connection* raw = conn.get();
    connections_.push_back(std::move(conn));
    accepted_.fetch_add(1);
    raw->thread = std::thread([this, raw] {
      SetThreadName("gdr-target");
      Serve(raw);
      raw->finished.store(true);
    });
  }
}

// Serves one daemon link: requests are answered strictly in order. Acks of writes that arrive
// back to back are sent together once no further request is already buffered. GPU regions go
// through this link's pinned staging pipes: a write's payload is copied to the device while the
// next one is received, and its ack leaves only once the copies have completed.
void TcpTarget::Serve(Connection* conn) {
  const int fd = conn->fd.get();
  if (absl::Status s = wire::AnswerChallenge(fd, secret_, absl::Now() + kChallengeTimeout);
      !s.ok()) {
    bad_frames_.fetch_add(1);
    GDR_LOG_EVERY_N_SEC(kWarning, 1)
        << "tcp target: dropping a connection that did not open as a daemon link: "
        << s.message();
    ::shutdown(fd, SHUT_RDWR);
    return;
  }
  conn->proven.store(true);
  BufferedReader reader(fd);
  std::vector<std::array<std::byte, wire::kHeaderSize>> acks;
  std::vector<bool> ack_on_gpu;  // parallel to acks
  size_t gpu_acks = 0;           // of them, GPU writes
  acks.reserve(64);
  std::map<int, std::unique_ptr<cuda::StagingPipe>> pipes;
  std::map<int, cuda::StagingStats> accounted;
  // Regions with device copies in flight stay referenced until the copies are done.
  std::vector<std::shared_ptr<Region>> in_flight;

  auto account = [&](const cuda::StagingPipe& p) {
    cuda::StagingStats& seen = accounted[p.ordinal()];
    const cuda::StagingStats& now = p.stats();
    gpu_to_device_.fetch_add(now.bytes_to_device - seen.bytes_to_device);
    gpu_from_device_.fetch_add(now.bytes_from_device - seen.bytes_from_device);
    gpu_copy_ns_.fetch_add(now.copy_ns - seen.copy_ns);
    gpu_wait_ns_.fetch_add(now.wait_ns - seen.wait_ns);
    seen = now;
  };
  auto pipe_for = [&](int ordinal) -> absl::StatusOr<cuda::StagingPipe*> {
    auto it = pipes.find(ordinal);
    if (it != pipes.end()) return it->second.get();
    absl::StatusOr<std::unique_ptr<cuda::StagingPipe>> p = pipes_->Take(ordinal);
    if (!p.ok()) return p.status();
    accounted[ordinal] = (*p)->stats();  // a pooled pipe's earlier links were counted then
    return pipes.emplace(ordinal, std::move(*p)).first->second.get();
  };
  // Waits for every device copy of this link; false when one failed.
  auto sync_gpu = [&]() -> bool {
    bool ok = true;
    for (auto& [ordinal, p] : pipes) {
      if (!p->busy()) continue;
      absl::Status s = p->Sync();
      account(*p);
      if (!s.ok()) {
        ok = false;
        GDR_LOG_EVERY_N_SEC(kError, 1) << "tcp target: copy into GPU " << ordinal
                                       << " failed: " << s.message();
      }
    }
    in_flight.clear();
    return ok;
  };
  auto flush_acks = [&]() -> absl::Status {
    if (acks.empty()) return absl::OkStatus();
    if (!sync_gpu()) {
      for (size_t i = 0; i < acks.size(); ++i) {
        if (!ack_on_gpu[i]) continue;
        absl::StatusOr<wire::Header> h = wire::Decode(acks[i], wire::kMaxPayload);
        if (h.ok() && h->status == wire::TargetStatus::kOk) {
          h->status = wire::TargetStatus::kInternal;
          wire::Encode(*h, acks[i]);
        }
      }
    }
    std::vector<struct iovec> iov;
    iov.reserve(acks.size());
    for (auto& a : acks) iov.push_back({a.data(), a.size()});
    absl::Status s = WriteFullV(fd, iov.data(), static_cast<int>(iov.size()));
    acks.clear();
    ack_on_gpu.clear();
    gpu_acks = 0;
    return s;
  };
  // Whether the acks wait for the next request: always when one is already buffered; after a
  // GPU write also when the socket holds more, so the next payload is received while this
  // one's copy runs (acking now would first wait for the copy). Up to twice the ring's slots,
  // so a steady stream still gets its acks every few copies.
  auto hold_acks = [&]() {
    if (reader.HasBuffered()) return true;
    if (gpu_acks == 0 || gpu_acks >= 2 * static_cast<size_t>(staging_.slots)) return false;
    struct pollfd p = {fd, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
  };
  for (;;) {
    std::array<std::byte, wire::kHeaderSize> raw;
    absl::Status s = reader.Read(raw.data(), raw.size());
    if (!s.ok()) break;  // daemon closed the link
    absl::StatusOr<wire::Header> req = wire::Decode(raw, wire::kMaxPayload);
    if (!req.ok() || !wire::IsRequest(req->opcode)) {
      bad_frames_.fetch_add(1);
      GDR_LOG_EVERY_N_SEC(kWarning, 1)
          << "tcp target: dropping a link that sent a bad frame: "
          << (req.ok() ? "response opcode in a request" : std::string(req.status().message()));
      break;
    }
    std::shared_ptr<Region> region = Lookup(req->rkey);
    wire::TargetStatus st = Check(region.get(), *req);
    if (st != wire::TargetStatus::kOk) refused_.fetch_add(1);
    const bool on_gpu = st == wire::TargetStatus::kOk && region->gpu != nullptr;
    cuda::StagingPipe* pipe = nullptr;
    if (on_gpu) {
      absl::StatusOr<cuda::StagingPipe*> p = pipe_for(region->gpu->ordinal());
      if (p.ok()) {
        pipe = *p;
      } else {
        GDR_LOG_EVERY_N_SEC(kError, 1) << "tcp target: no staging for GPU "
                                       << region->gpu->ordinal() << ": " << p.status().message();
        st = wire::TargetStatus::kInternal;
        refused_.fetch_add(1);
      }
    }
    wire::Header resp = *req;
    resp.status = st;
    if (req->opcode == wire::Opcode::kWriteReq) {
      resp.opcode = wire::Opcode::kWriteAck;
      if (pipe != nullptr) {
        cuda::StagingPipe::Result r =
            pipe->ToDevice(req->address, req->length,
                           [&](std::byte* dst, size_t n) { return reader.Read(dst, n); });
        account(*pipe);
        if (!r.io.ok()) break;
        if (!r.gpu.ok()) {
          GDR_LOG_EVERY_N_SEC(kError, 1) << "tcp target: copy into GPU failed: "
                                         << r.gpu.message();
          resp.status = wire::TargetStatus::kInternal;
          refused_.fetch_add(1);
        }
        in_flight.push_back(region);
      } else {
        s = st == wire::TargetStatus::kOk
                ? reader.Read(region->host + (req->address - region->base), req->length)
                : reader.Skip(req->length);
        if (!s.ok()) break;
      }
      wire::Encode(resp, acks.emplace_back());
      ack_on_gpu.push_back(pipe != nullptr);
      if (pipe != nullptr) ++gpu_acks;
      if (acks.size() >= 64 || !hold_acks()) {
        if (!flush_acks().ok()) break;
      }
    } else {
      resp.opcode = wire::Opcode::kReadData;
      if (!flush_acks().ok()) break;
      std::array<std::byte, wire::kHeaderSize> hdr;
      if (pipe != nullptr) {
        bool header_pending = false;
        cuda::StagingPipe::Result r = pipe->FromDevice(
            req->address, req->length,
            [&]() {
              header_pending = true;
              return absl::OkStatus();
            },
            [&](const std::byte* src, size_t n) {
              struct iovec iov[2] = {{hdr.data(), hdr.size()},
                                     {const_cast<std::byte*>(src), n}};
              if (header_pending) {
                header_pending = false;
                wire::Encode(resp, hdr);
                return WriteFullV(fd, iov, 2);
              }
              return WriteFullV(fd, iov + 1, 1);
            });
        account(*pipe);
        if (!r.io.ok()) break;
        if (r.gpu.ok() && header_pending) {  // zero-length read: the header alone
          wire::Encode(resp, hdr);
          if (!WriteFull(fd, hdr.data(), hdr.size()).ok()) break;
        }
        if (!r.gpu.ok()) {
          GDR_LOG_EVERY_N_SEC(kError, 1) << "tcp target: copy out of GPU failed: "
                                         << r.gpu.message();
          refused_.fetch_add(1);
          if (r.sent_any) break;  // the frame is half sent: only dropping the link is honest
          resp.status = wire::TargetStatus::kInternal;
          wire::Encode(resp, hdr);
          if (!WriteFull(fd, hdr.data(), hdr.size()).ok()) break;
        }
        continue;
      }
      wire::Encode(resp, hdr);
      struct iovec iov[2] = {{hdr.data(), hdr.size()}, {nullptr, 0}};
      int cnt = 1;
      if (st == wire::TargetStatus::kOk) {
        iov[1] = {region->host + (req->address - region->base), req->length};
        cnt = 2;
      }
      if (!WriteFullV(fd, iov, cnt).ok()) break;
    }
  }
  // No copy may outlive the link's staging memory or its regions; pipes whose copies all
  // succeeded go back to the pool for the next link.
  if (sync_gpu()) {
    for (auto& [ordinal, p] : pipes) pipes_->Give(std::move(p));
  }
  ::shutdown(fd, SHUT_RDWR);
}

}  // namespace gdr
