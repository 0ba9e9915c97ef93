#include "daemon/transport/local/local_initiator.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
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

// Sizes as a person reads them in a log line ("11.8 GiB"); FormatSize is exact.
std::string Approx(uint64_t bytes) {
  if (bytes < (uint64_t{1} << 30)) return FormatSize(bytes);
  return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / (uint64_t{1} << 30));
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
  int lane = -1;                // the region's GPU ordinal; -1 for host memory (CopyLanes)
  OpDone done;
  std::atomic<uint32_t> remaining{0};
  std::atomic<bool> started{false};
  absl::Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);  // the first failure of its pieces
};

uint64_t LocalInitiator::LockBudgetBytes(const LocalOptions& options) {
  if (options.lock_budget_bytes.has_value()) return *options.lock_budget_bytes;
  // Half of the host's memory: what locked file pages may take from the page cache and every
  // process on the host (they cannot be reclaimed while locked).
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024 / 2;
    meminfo.ignore(256, '\n');
  }
  GDR_LOG(kWarning) << "local: cannot read MemTotal from /proc/meminfo; file-backed volumes are "
                       "not page-locked (set --local-lock-budget)";
  return 0;
}

absl::StatusOr<std::unique_ptr<LocalInitiator>> LocalInitiator::Create(LocalOptions options,
                                                                       const Store* store,
                                                                       std::string server_name,
                                                                       PieceLockFn lock) {
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
  if (options.lock_piece_bytes < 4096 || options.lock_piece_bytes % 4096 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--local-lock-piece-size ", options.lock_piece_bytes, " is not a multiple of 4KiB"));
  }
  if (options.lock_threads < 1 || options.lock_threads > 64) {
    return absl::InvalidArgumentError(absl::StrCat("--local-lock-threads ", options.lock_threads,
                                                   " is not in 1..64"));
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
  // A bounce buffer per copy thread: two slots, so that one fills while the other's GPU copy
  // runs; mapped on the first staged copy, or ahead of it by the locker's start.
  const size_t slot_bytes =
      std::clamp<uint64_t>(options.split_bytes / 4, uint64_t{1} << 20, uint64_t{16} << 20);
  for (uint32_t i = 0; i < options.copy_threads; ++i) {
    self->bounce_.push_back(std::make_unique<BounceBuffer>(slot_bytes, 2));
  }
  // Every GPU's context before the first page-lock: a context made later maps all the memory
  // locked by then, seconds for the GiBs of a checkpoint's volumes, inside a client's first
  // REGISTER on that GPU (which timed out on a 4-GPU host). Only with the real locks: injected
  // ones lock nothing.
  if (!lock && cuda::DriverStatus().ok()) {
    const absl::Time t0 = absl::Now();
    absl::StatusOr<cuda::RetainedContexts> held = cuda::RetainContexts();
    if (!held.ok()) {
      GDR_LOG(kWarning) << "local: GPU contexts are made at each GPU's first use: "
                        << held.status().message();
    } else {
      GDR_LOG(kInfo) << "local: contexts on " << held->ordinals.size() << " GPU(s) in "
                     << absl::FormatDuration(absl::Now() - t0);
      for (const std::string& why : held->left) GDR_LOG(kWarning) << "local: " << why;
    }
  }
  self->budget_ = std::make_shared<LockBudget>(LockBudgetBytes(options));
  PageLockOptions lo;
  lo.piece_bytes = options.lock_piece_bytes;
  lo.threads = options.lock_threads;
  lo.idle = absl::Milliseconds(options.lock_idle_ms);
  self->locker_ = std::make_unique<PageLocker>(
      lo, lock ? std::move(lock) : CudaPieceLock(),
      [raw = self.get()] { return raw->LockerReady(); });
  self->preparer_ = store->AddPreparer([raw = self.get()](const Volume& v) {
    StorePin* pin = raw->PinLater(v);
    // A volume made at run time is about to be used. With a GPU on this host it is locked
    // here, on the thread making it (nobody can reach it yet), not piece by piece behind the
    // first save into it: a checkpoint save into new volumes measured 15 GB/s with the lock
    // inside its first pass, 54 GB/s without.
    if (cuda::DriverStatus().ok()) raw->locker_->LockNow(*pin->locks());
    return absl::OkStatus();
  });
  // Volumes served from the start: with a GPU on this host, locked whole in the background
  // (the daemon serves at once; copies are staged until their pieces are locked); the pieces
  // GPU copies touch first go first either way.
  for (const std::shared_ptr<const Volume>& volume : store->Volumes()) {
    StorePin* pin = self->PinLater(*volume);
    if (options.lock_at_start) self->locker_->LockWhole(pin->locks(), volume);
  }
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
  h.names = handoff::HandoffLimitNames::Flags("local-");
  absl::StatusOr<std::unique_ptr<handoff::HandoffServer>> server =
      handoff::HandoffServer::Start(std::move(h));
  if (!server.ok()) {
    return absl::Status(server.status().code(),
                        absl::StrCat("local transport: ", server.status().message()));
  }
  self->server_ = std::move(*server);
  self->busy_since_ = std::make_unique<std::atomic<int64_t>[]>(options.copy_threads);
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
  // Nothing is locked yet. A file-backed volume's locked pages count against the budget; a
  // memory volume's pages are resident anyway.
  auto locks = std::make_shared<VolumeLocks>(
      volume.name(), volume.data(), volume.size(), options_.lock_piece_bytes,
      volume.file().empty() ? nullptr : budget_, volume.read_only());
  auto pin = std::make_unique<StorePin>(std::move(locks), volume.fd());
  StorePin* raw = pin.get();
  volume.Attach(this, std::move(pin));
  return raw;
}

absl::Status LocalInitiator::LockerReady() {
  GDR_RETURN_IF_ERROR(cuda::DriverStatus());
  // The copy threads' bounce slots are made now too, not inside the first GPU op.
  for (const std::unique_ptr<BounceBuffer>& b : bounce_) {
    if (absl::Status s = b->Ensure(); !s.ok()) {
      GDR_LOG(kWarning) << s.message() << " (made again on the first staged copy)";
      break;
    }
  }
  return absl::OkStatus();
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
  if ((*region)->gpu()) state->lane = (*region)->gpu_ordinal();
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
      const size_t at = lanes_.Pick(queue_, [](const Piece& p) { return p.op->lane; });
      piece = std::move(queue_[at]);
      queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(at));
      lanes_.Begin(piece.op->lane);
    }
    if (!piece.op->started.exchange(true)) waiting_.fetch_sub(1);
    // A GPU op never waits for a page lock: the pieces of its volume it touches are queued
    // for the locker threads, and until they are locked it is staged.
    const bool gpu = piece.op->region != nullptr && piece.op->region->gpu();
    if (gpu && piece.op->pin != nullptr && piece.length > 0) {
      const VolumeLocks& locks = *piece.op->pin->locks();
      const std::byte* at = piece.op->local + piece.offset;
      if (at >= locks.data() && static_cast<uint64_t>(at - locks.data()) < locks.size()) {
        locker_->Touch(piece.op->pin->locks(), piece.op->volume,
                       static_cast<uint64_t>(at - locks.data()), piece.length);
      }
    }
    if (gpu) locker_->CopyBegins();
    busy_.fetch_add(1);
    busy_since_[index].store(absl::GetCurrentTimeNanos());
    const absl::Status s = Copy(piece, *bounce_[index]);
    busy_since_[index].store(0);
    busy_.fetch_sub(1);
    if (gpu) locker_->CopyEnds();
    {
      absl::MutexLock lock(&mu_);
      lanes_.End(piece.op->lane);
    }
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
  // GPU memory: straight from the store pieces locked by now, the rest through this
  // thread's bounce slots.
  const cuda::ImportedGpuMemory* gpu = region.gpu_memory();
  const uint64_t in_allocation = region.device_ptr() - gpu->ptr() + at;
  uint64_t staged = 0;
  absl::Status s = CopyStoreGpu(*gpu, in_allocation, store, piece.length, op.direction, op.pin,
                                bounce, &staged);
  if (staged > 0) {
    staged_.fetch_add(1, std::memory_order_relaxed);
    staged_bytes_.fetch_add(staged, std::memory_order_relaxed);
  }
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
  // No piece starts locking from here; one being locked is finished first (bounded by a
  // piece), so the pins can be unlocked after.
  if (locker_ != nullptr) locker_->Stop();
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
  uint64_t locked = 0;
  size_t partly = 0;
  std::vector<std::shared_ptr<const Volume>> volumes = store_->Volumes();
  volumes.push_back(store_->fault_source_held());
  for (const std::shared_ptr<const Volume>& v : volumes) {
    const auto* pin = static_cast<const StorePin*>(v->AttachmentOf(this));
    if (pin == nullptr || pin->locks()->locked_bytes() == 0) continue;
    const VolumeLocks& l = *pin->locks();
    locked += l.locked_bytes();
    if (!l.complete()) {
      ++partly;
    } else if (pinned.size() < 8) {
      const bool ro = l.state(0) == VolumeLocks::State::kReadOnly;
      pinned.push_back(ro ? v->name() + " (read-only)" : v->name());
    } else if (pinned.size() == 8) {
      pinned.push_back("...");
    }
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
      partly == 0 ? "" : absl::StrCat("; ", partly, " volumes page-locked in part"),
      absl::StrCat("; ", Approx(locked), " page-locked (file pages ", Approx(budget_->used()),
                   " of the ", Approx(budget_->limit()), " budget); ",
                   staged_.load(std::memory_order_relaxed),
                   " GPU copies staged through bounce buffers (",
                   Approx(staged_bytes_.load(std::memory_order_relaxed)), ")"));
}

void LocalInitiator::FillInfo(v1::GetInfoResponse* info) const {
  v1::LocalInfo* local = info->mutable_local();
  local->set_socket_path(server_->socket_path());
  local->set_host_id(host_id_);
}

void LocalInitiator::FillStats(v1::GetStatsResponse* stats) const {
  for (v1::VolumeStats& v : *stats->mutable_volumes()) {
    std::shared_ptr<const Volume> volume = store_->Find(v.name());
    if (volume == nullptr) continue;
    const auto* pin = static_cast<const StorePin*>(volume->AttachmentOf(this));
    if (pin != nullptr) v.set_page_locked_bytes(pin->locks()->locked_bytes());
  }
}

}  // namespace gdr
