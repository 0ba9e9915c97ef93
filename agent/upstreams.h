// Where the agent forwards its clients' ops, behind one interface: one storage daemon or
// several (DaemonSet: each volume goes to the daemon that serves it), or a cluster of daemons
// (ClusterUpstream: volumes striped over members found through etcd or a members file). The
// service, the client table and the agent see only this.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc/grpc_status.h"
#include "common/handoff/imported_region.h"
#include "gdrstore/client.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr::agent {

// An imported region as registered upstream (what it holds is the implementation's). Dropping
// it withdraws the registrations; no op may still use it.
class UpstreamMemory {
 public:
  virtual ~UpstreamMemory() = default;
};

// One op as the agent forwards it: what to move and where in registered memory.
struct ForwardedOp {
  gdrstore::OpKind kind = gdrstore::OpKind::kWrite;
  gdrstore::Extent extent;
  const UpstreamMemory* memory = nullptr;  // must outlive the op (until `done` has run)
  size_t offset = 0;                       // into the region
  bool crc32c = false;                     // ask the daemon for the bytes' CRC32C
  // time_point::max(): the configured upstream timeout from now.
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
};

// What GetInfo through the agent reports of its upstream: the volumes its clients may name (the
// page asked for), the limits of the daemons, and the path to each daemon (or member) in words.
struct UpstreamInfo {
  gdrstore::v1::GetInfoResponse info;  // volumes, next_volumes_after and limits only
  std::string paths;
};

class Upstreams {
 public:
  using Done = std::function<void(absl::StatusOr<gdrstore::OpResult>)>;
  using InfoDone = std::function<void(absl::StatusOr<UpstreamInfo>)>;
  virtual ~Upstreams() = default;

  // Registers memory the agent imported, in place, with whatever the ops will need. The error
  // names the daemon or cluster. Thread-safe.
  virtual absl::StatusOr<std::unique_ptr<UpstreamMemory>> Register(
      const handoff::ImportedRegion& region) = 0;
  // A lane for a caller whose ops should share one upstream call where there are such; any
  // number is valid.
  virtual uint32_t PickLane() = 0;
  // Forwards `op`; `done` runs once, possibly inline, never blocking the caller. Errors start
  // with where they came from ("daemon HOST:PORT: ", "cluster SOURCE: "); not-admitted refusals
  // keep their mark (IsNotAdmitted).
  virtual void Submit(const ForwardedOp& op, uint32_t lane, Done done) = 0;
  // Asks the daemons (members) within `deadline` for the volumes `request` names (a page, one
  // or none: gdrstore.proto GetInfoRequest, checked by CheckVolumePaging); `done` runs once, on
  // another thread.
  virtual void GetInfo(const gdrstore::v1::GetInfoRequest& request,
                       std::chrono::system_clock::time_point deadline, InfoDone done) = 0;
  // One line, cheap (STATUS lines, logs): "agent -> 127.0.0.1:50051 over tcp (...)".
  virtual std::string Path() const = 0;
  // Registrations live upstream now (each region's until its last op is done).
  virtual uint64_t live_registrations() const = 0;
  // New credentials (a token, TLS files) toward the daemons: fresh connections with `options`
  // (daemon_address set per daemon) take every op and GetInfo from now on, the ones replaced
  // finish what they carry, and each region is registered anew at its next op. All or
  // nothing: the first connection's error (naming its daemon) leaves the running ones in
  // place. Not with another Reconnect at once.
  virtual absl::Status Reconnect(const gdrstore::ClientOptions& options) = 0;
  // Drops the registrations on replaced connections that no op holds (an idle region is
  // registered anew at its next op), then closes the connections Reconnect replaced that
  // nothing uses any more (no op or GetInfo). Called now and then from one thread: it may wait
  // for a client to close.
  virtual void Sweep() {}
};

// Drops the registrations of one region that a Reconnect replaced and that no op holds any
// more (`replaced` holds the only reference): their buffers have nothing left to wait for.
template <typename Registration>
void DropUnheld(std::vector<std::shared_ptr<Registration>>* replaced) {
  std::erase_if(*replaced,
                [](const std::shared_ptr<Registration>& r) { return r.use_count() == 1; });
}

// What every Upstreams' region keeps of its registrations that a Reconnect replaced, under the
// region's lock (`mu`, which guards the region's own registrations too).
template <typename Registration>
struct ReplacedRegistrations {
  // An op's hold on `*reg` ends: a replaced registration goes with its last op (from the op's
  // callback, which a buffer allows), not left for a later op of the region to find.
  void Release(std::shared_ptr<Registration>* reg) const {
    absl::MutexLock lock(&mu);
    reg->reset();
    DropUnheld(&replaced);
  }

  mutable absl::Mutex mu;
  // Replaced ones some op may still run on; dropped once none holds them.
  mutable std::vector<std::shared_ptr<Registration>> replaced ABSL_GUARDED_BY(mu);
};

// Sweep's part in one region (its lock held): each of `regs` whose connection Reconnect
// replaced (`stale(index, registration)`) leaves its place, to be registered anew at the
// region's next op; of those and the ones replaced before, the ones no op holds move to
// `*idle`, to be dropped by the caller outside the region's lock, and the others go with their
// last op (Release). Without this a region left idle held a replaced connection open, one more
// at every rotation.
template <typename Registration, typename Stale>
void TakeReplaced(std::span<std::shared_ptr<Registration>> regs, const Stale& stale,
                  std::vector<std::shared_ptr<Registration>>* replaced,
                  std::vector<std::shared_ptr<Registration>>* idle) {
  for (size_t i = 0; i < regs.size(); ++i) {
    if (regs[i] != nullptr && stale(i, *regs[i])) replaced->push_back(std::move(regs[i]));
  }
  for (std::shared_ptr<Registration>& r : *replaced) {
    if (r.use_count() == 1) idle->push_back(std::move(r));
  }
  std::erase(*replaced, nullptr);
}

// The regions an Upstreams has registered, for its Sweep to reach those no op touches. Each
// region adds itself once registered (holding none of its own locks) and removes itself as it
// goes; shared, so either may go first. Thread-safe.
template <typename Memory>
class LiveMemories {
 public:
  void Add(const Memory* m) {
    absl::MutexLock lock(&mu_);
    live_.insert(m);
  }
  // Waits for a ForEach under way: a region is not dropped while `f` runs on it.
  void Remove(const Memory* m) {
    absl::MutexLock lock(&mu_);
    live_.erase(m);
  }
  // `f` on every region, under the registry's lock (which `f` must not take).
  template <typename F>
  void ForEach(const F& f) {
    absl::MutexLock lock(&mu_);
    for (const Memory* m : live_) f(*m);
  }

 private:
  absl::Mutex mu_;
  std::unordered_set<const Memory*> live_ ABSL_GUARDED_BY(mu_);
};

// `status` with `prefix` before its message, its code and not-admitted mark kept.
inline absl::Status Prefixed(absl::string_view prefix, const absl::Status& status) {
  absl::Status out(status.code(), absl::StrCat(prefix, status.message()));
  return IsNotAdmitted(status) ? MarkNotAdmitted(std::move(out)) : out;
}

}  // namespace gdr::agent
