#include "daemon/transport/local/local_initiator.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/base/thread_name.h"
#include "common/base/units.h"
#include "common/cuda/gpu.h"
#include "common/cuda/gpu_ipc.h"
#include "common/handoff/host_id.h"
#include "common/handoff/imported_region.h"
#include "daemon/store/mapping_guard.h"

namespace gdr {

namespace v1 = gdrstore::v1;

namespace {

std::string Admitted(const LocalOptions& o, uid_t self) {
  if (o.allow_any) return "everyone";
  std::vector<std::string> who = {"uid 0"};
  if (self != 0) who.push_back(absl::StrCat("uid ", self, " (the daemon's)"));
  for (uid_t u : o.allow_uids) who.push_back(absl::StrCat("uid ", u));
  for (gid_t g : o.allow_gids) who.push_back(absl::StrCat("gid ", g));
  return absl::StrJoin(who, ", ");
}

}  // namespace

absl::Status AdmitLocalPeer(const LocalOptions& o, uid_t self, const PeerCredentials& peer) {
  if (o.allow_any || peer.uid == 0 || peer.uid == self) return absl::OkStatus();
  if (std::find(o.allow_uids.begin(), o.allow_uids.end(), peer.uid) != o.allow_uids.end() ||
      std::find(o.allow_gids.begin(), o.allow_gids.end(), peer.gid) != o.allow_gids.end()) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "uid ", peer.uid, " (gid ", peer.gid, ", pid ", peer.pid,
      ") may not use gdrstored's local socket; admitted: ", Admitted(o, self),
      " (--local-allow-uid, --local-allow-gid)"));
}

mode_t LocalSocketMode(const LocalOptions& o) {
  if (o.socket_mode >= 0) return static_cast<mode_t>(o.socket_mode);
  const bool others = o.allow_any || !o.allow_uids.empty() || !o.allow_gids.empty();
  return others ? 0666 : 0600;
}

struct LocalInitiator::OpState {
  Direction direction = Direction::kStoreToClient;
  std::byte* local = nullptr;
  std::shared_ptr<const Volume> volume;  // held: the pin is the volume's
  StorePin* pin = nullptr;               // null for a volume without one
  std::shared_ptr<const handoff::ImportedRegion> region;
  uint64_t region_offset = 0;  // of the op's first byte in the region
  OpDone done;
  std::atomic<uint32_t> remaining{0};
  std::atomic<bool> started{false};
  absl::Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);  // the first failure of its pieces
};

absl::StatusOr<std::unique_ptr<LocalInitiator>> LocalInitiator::Create(LocalOptions options,
                                                                       const Store* store,
                                                                       std::string server_name) {
  if (options.socket_path.empty()) {
    return absl::InvalidArgumentError("the local transport needs a socket path (--local-socket)");
  }
  if (options.copy_threads < 1 || options.copy_threads > 256) {
    return absl::InvalidArgumentError(absl::StrCat("--local-copy-threads ", options.copy_threads,
                                                   " is not in 1..256"));
  }
  if (options.split_bytes < 4096) {
    return absl::InvalidArgumentError("the local transport's split size must be >= 4KiB");
  }
  // A client may truncate its memfd under an op; the copy then takes SIGBUS, which the guard
  // turns into the op's error (file volumes install it too).
  InstallMappingGuard();
  std::unique_ptr<LocalInitiator> self(new LocalInitiator(options, handoff::HostId()));
  if (self->host_id_.empty()) {
    GDR_LOG(kWarning) << "local: cannot read /proc/sys/kernel/random/boot_id; GetInfo.local "
                         "carries no host id, so clients cannot tell they share this host";
  }
  self->store_ = store;
  self->preparer_ = store->AddPreparer([raw = self.get()](const Volume& v) {
    StorePin* pin = raw->PinLater(v);
    // A volume made at run time is about to be used. With a GPU on this host its page lock
    // (cuMemHostRegister, which the driver serialises) is taken here, on the thread making
    // it, not inside the first GPU op that touches it: a checkpoint save into new volumes
    // measured 15 GB/s with the lock inside its first pass, 54 GB/s without. Volumes served
    // from the start stay locked on first use, so a host-memory-only daemon starts fast.
    if (cuda::DriverStatus().ok()) pin->Ensure();
    return absl::OkStatus();
  });
  for (const std::shared_ptr<const Volume>& volume : store->Volumes()) self->PinLater(*volume);
  self->PinLater(store->fault_source());

  handoff::HandoffServerOptions h;
  h.socket_path = options.socket_path;
  h.socket_mode = LocalSocketMode(options);
  h.server_name = std::move(server_name);
  h.admit = [o = options, uid = ::getuid()](const PeerCredentials& peer) {
    return AdmitLocalPeer(o, uid, peer);
  };
  h.max_regions_per_session = options.max_regions_per_client;
  h.max_bytes_per_session = options.max_bytes_per_client;
  h.max_sessions = options.max_clients;
  h.fd_reserve = options.fd_reserve;
  h.names.max_sessions = "--local-max-clients";
  h.names.max_regions_per_session = "--local-max-regions-per-client";
  h.names.max_bytes_per_session = "--local-max-bytes-per-client";
  h.names.fd_reserve = "--local-fd-reserve";
  absl::StatusOr<std::unique_ptr<handoff::HandoffServer>> server =
      handoff::HandoffServer::Start(std::move(h));
  if (!server.ok()) {
    return absl::Status(server.status().code(),
                        absl::StrCat("local transport: ", server.status().message()));
  }
  self->server_ = std::move(*server);
  self->busy_since_ = std::make_unique<std::atomic<int64_t>[]>(options.copy_threads);
  // A bounce buffer per copy thread, mapped on its first staged copy.
  const size_t bounce_bytes =
      std::clamp<uint64_t>(options.split_bytes, uint64_t{1} << 20, uint64_t{64} << 20);
  for (uint32_t i = 0; i < options.copy_threads; ++i) {
    self->bounce_.push_back(std::make_unique<BounceBuffer>(bounce_bytes));
  }
  for (uint32_t i = 0; i < options.copy_threads; ++i) {
    self->busy_since_[i].store(0);
    self->threads_.emplace_back([p = self.get(), i] { p->Run(i); });
  }
  return self;
}

LocalInitiator::LocalInitiator(LocalOptions options, std::string host_id)
    : options_(std::move(options)), host_id_(std::move(host_id)) {}

LocalInitiator::~LocalInitiator() {
  Shutdown();
  // The pins' CUDA registrations go with the initiator, before the store's pages.
  if (store_ != nullptr) {
    store_->RemovePreparer(preparer_);
    for (const std::shared_ptr<const Volume>& v : store_->Volumes()) v->Detach(this);
    store_->fault_source().Detach(this);
  }
}

StorePin* LocalInitiator::PinLater(const Volume& volume) {
  // Nothing is locked yet: the first GPU copy of the volume does it (StorePin::Ensure).
  auto pin = std::make_unique<StorePin>(volume.name(), volume.data(), volume.size());
  StorePin* raw = pin.get();
  volume.Attach(this, std::move(pin));
  return raw;
}

absl::Status LocalInitiator::Prepare(const TransferOp& op, OpDone& done,
                                     std::vector<Piece>* pieces) {
  const LocalDestination* d = DestinationOf<LocalDestination>(op);
  if (d == nullptr) {
    return absl::InternalError("the local transport was handed an op of another transport");
  }
  const bool writes_client = op.direction == Direction::kStoreToClient;
  absl::StatusOr<std::shared_ptr<const handoff::ImportedRegion>> region = server_->Resolve(
      d->session, d->key, op.rkey, op.remote_address, op.length, writes_client);
  if (!region.ok()) return region.status();
  auto state = std::make_shared<OpState>();
  state->direction = op.direction;
  state->local = op.local;
  state->volume = op.store_volume;
  if (state->volume != nullptr) {
    state->pin = static_cast<StorePin*>(state->volume->AttachmentOf(this));
  }
  state->region_offset = op.remote_address - (*region)->address();
  state->region = *std::move(region);
  state->done = std::move(done);
  if (op.length == 0) {  // ValidateOp refuses these; an op without bytes is one empty piece
    state->remaining.store(1);
    pieces->push_back(Piece{state, 0, 0});
    return absl::OkStatus();
  }
  // A large op is cut into pieces the copy threads share (memory bandwidth is more than one
  // core's), each at least split_bytes, at most one per thread.
  const uint64_t n = std::clamp<uint64_t>(op.length / options_.split_bytes, 1,
                                          options_.copy_threads);
  uint64_t step = (op.length + n - 1) / n;
  step = (step + 63) / 64 * 64;  // whole cache lines, except the tail
  state->remaining.store(static_cast<uint32_t>((op.length + step - 1) / step));
  for (uint64_t off = 0; off < op.length; off += step) {
    pieces->push_back(Piece{state, off, std::min(step, op.length - off)});
  }
  return absl::OkStatus();
}

absl::Status LocalInitiator::Submit(const TransferOp& op, OpDone done) {
  Submission s{op, std::move(done), absl::OkStatus()};
  SubmitBatch(std::span<Submission>(&s, 1));
  return s.status;
}

void LocalInitiator::SubmitBatch(std::span<Submission> batch) {
  std::vector<Piece> pieces;
  uint64_t ops = 0;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) {
      for (Submission& s : batch) s.status = absl::CancelledError("the daemon is shutting down");
      return;
    }
  }
  for (Submission& s : batch) {
    s.status = Prepare(s.op, s.done, &pieces);
    if (s.status.ok()) ++ops;
  }
  if (pieces.empty()) return;
  in_flight_.fetch_add(ops);
  waiting_.fetch_add(ops);
  bool cancelled = false;
  {
    absl::MutexLock lock(&mu_);
    cancelled = shutdown_;
    if (!cancelled) {
      for (Piece& p : pieces) queue_.push_back(std::move(p));
      if (queue_.size() > 1) {
        work_.SignalAll();
      } else {
        work_.Signal();
      }
    }
  }
  // Raced with Shutdown: the ops were taken, so they end CANCELLED.
  if (cancelled) {
    for (const Piece& p : pieces) Finish(p, absl::CancelledError("the daemon is shutting down"));
  }
}

void LocalInitiator::Run(size_t index) {
  SetThreadName(absl::StrCat("local-copy-", index).c_str());
  for (;;) {
    Piece piece;
    {
      absl::MutexLock lock(&mu_);
      while (!shutdown_ && queue_.empty()) work_.Wait(&mu_);
      if (queue_.empty()) return;  // shut down, nothing left
      piece = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!piece.op->started.exchange(true)) waiting_.fetch_sub(1);
    // A GPU op's store pages are page-locked first (once per volume; a large volume takes a
    // while), outside the copy the health probe times.
    if (piece.op->pin != nullptr && piece.op->region->gpu()) piece.op->pin->Ensure();
    busy_.fetch_add(1);
    busy_since_[index].store(absl::GetCurrentTimeNanos());
    const absl::Status s = Copy(piece, *bounce_[index]);
    busy_since_[index].store(0);
    busy_.fetch_sub(1);
    Finish(piece, s);
  }
}

absl::Status LocalInitiator::Copy(const Piece& piece, BounceBuffer& bounce) {
  OpState& op = *piece.op;
  const handoff::ImportedRegion& region = *op.region;
  std::byte* store = op.local + piece.offset;
  const uint64_t at = op.region_offset + piece.offset;  // into the region
  if (piece.length == 0) return absl::OkStatus();
  if (!region.gpu()) {
    std::byte* client = region.host() + at;
    std::byte* dst = op.direction == Direction::kStoreToClient ? client : store;
    const std::byte* src = op.direction == Direction::kStoreToClient ? store : client;
    const size_t n = piece.length;
    std::optional<const void*> fault = RunGuarded([dst, src, n] { std::memcpy(dst, src, n); });
    if (!fault) return absl::OkStatus();
    const auto* f = static_cast<const std::byte*>(*fault);
    if (f >= region.host() && f < region.host() + region.size()) {
      // The memfd is sealed against shrinking (ImportedRegion), so this is not expected; if
      // it happens anyway it is the client's memory that failed, not the daemon.
      return absl::FailedPreconditionError(absl::StrCat(
          "the client's memory of rkey ", region.rkey(), " is no longer backed at +",
          f - region.host()));
    }
    return MappingFaultStatus(*fault);
  }
  // GPU memory: from the store pages Run has had page-locked where the driver allowed it,
  // else through this thread's bounce buffer.
  const cuda::ImportedGpuMemory* gpu = region.gpu_memory();
  const uint64_t in_allocation = region.device_ptr() - gpu->ptr() + at;
  bool staged = false;
  absl::Status s = CopyStoreGpu(*gpu, in_allocation, store, piece.length, op.direction, op.pin,
                                bounce, &staged);
  if (staged) staged_.fetch_add(1, std::memory_order_relaxed);
  return s;
}

void LocalInitiator::Finish(const Piece& piece, const absl::Status& status) {
  OpState& op = *piece.op;
  if (!status.ok()) {
    errors_.fetch_add(1);
    absl::MutexLock lock(&op.mu);
    if (op.status.ok()) op.status = status;
  }
  if (op.remaining.fetch_sub(1) != 1) return;
  absl::Status result;
  {
    absl::MutexLock lock(&op.mu);
    result = op.status;
  }
  if (!op.started.exchange(true)) waiting_.fetch_sub(1);
  in_flight_.fetch_sub(1);
  OpDone done = std::move(op.done);
  // The region may be unmapped from here on (its client gone): drop it before answering.
  op.region.reset();
  done(std::move(result));
}

absl::Status LocalInitiator::CheckHealth(absl::Duration max_stall) const {
  const int64_t now = absl::GetCurrentTimeNanos();
  for (uint32_t i = 0; i < options_.copy_threads; ++i) {
    const int64_t since = busy_since_[i].load();
    if (since != 0 && absl::Nanoseconds(now - since) > max_stall) {
      return absl::UnavailableError(absl::StrCat(
          "local copy thread ", i, " has been inside one copy for ",
          absl::FormatDuration(absl::Nanoseconds(now - since))));
    }
  }
  return absl::OkStatus();
}

void LocalInitiator::Shutdown() {
  std::deque<Piece> left;
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_ && threads_.empty()) return;
    shutdown_ = true;
    left.swap(queue_);
    work_.SignalAll();
  }
  for (const Piece& p : left) Finish(p, absl::CancelledError("the daemon is shutting down"));
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  if (server_ != nullptr) server_->Stop();
}

InitiatorStats LocalInitiator::stats() const {
  InitiatorStats s;
  s.in_use = busy_.load();
  s.capacity = options_.copy_threads;
  s.clients = server_ != nullptr ? static_cast<uint32_t>(server_->stats().sessions) : 0;
  s.in_flight = in_flight_.load();
  s.errors = errors_.load();
  s.waiting = waiting_.load();
  return s;
}

handoff::HandoffStats LocalInitiator::handoff_stats() const { return server_->stats(); }

std::string LocalInitiator::Describe() const {
  const handoff::HandoffStats h = server_->stats();
  std::vector<std::string> pinned;
  std::vector<std::shared_ptr<const Volume>> volumes = store_->Volumes();
  volumes.push_back(store_->fault_source_held());
  for (const std::shared_ptr<const Volume>& v : volumes) {
    const auto* pin = static_cast<const StorePin*>(v->AttachmentOf(this));
    if (pin == nullptr) continue;
    if (pin->mode() == StorePin::Mode::kReadWrite) pinned.push_back(v->name());
    if (pin->mode() == StorePin::Mode::kReadOnly) pinned.push_back(v->name() + " (read-only)");
  }
  const std::string mode = absl::StrFormat("%04o", LocalSocketMode(options_) & 07777);
  return absl::StrCat(
      "socket ", server_->socket_path(), " (mode ", mode, "; admits ",
      Admitted(options_, ::getuid()), "), ", options_.copy_threads, " copy threads, ",
      h.sessions, " sessions, ", h.regions, " regions (", FormatSize(h.bytes), ")",
      options_.max_bytes_per_client > 0
          ? absl::StrCat(", up to ", FormatSize(options_.max_bytes_per_client), " per client")
          : "",
      pinned.empty() ? "" : absl::StrCat("; page-locked for GPU copies: ",
                                         absl::StrJoin(pinned, ", ")),
      absl::StrCat("; ", staged_.load(std::memory_order_relaxed),
                   " GPU copies staged through bounce buffers"));
}

void LocalInitiator::FillInfo(v1::GetInfoResponse* info) const {
  v1::LocalInfo* local = info->mutable_local();
  local->set_socket_path(server_->socket_path());
  local->set_host_id(host_id_);
}

}  // namespace gdr
