// The agent's storage daemons when named one by one (--daemon, repeatable): one Upstream each,
// every region registered with each of them, and each op sent to the daemon that serves its
// volume. Which daemon serves what comes from their GetInfo (every page), asked again (at most
// once a second) when an op names a volume none is known to serve, so a daemon that was down
// when the agent started is found once it is up. A volume two daemons serve is refused, not
// guessed. Given a DNS name instead (--daemon-service: a headless Service's), the daemons are
// every address it resolves to, resolved again every interval on a thread of its own: a new
// address is connected and a region registered with it at its first op there; an address
// gone from the answer is retired (no op or GetInfo goes to it) until it comes back. New
// credentials (Reconnect) replace each daemon's Upstream in its slot: ops route as before, and
// the replaced one lives on until no op or GetInfo holds it (a region's registration on it is
// dropped by Sweep once no op holds it, and made again on the new one at the region's next op).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/upstream.h"
#include "agent/upstreams.h"

namespace gdr::agent {

class DaemonSet final : public Upstreams {
 public:
  // Connects to every address in `daemons` with `options` (daemon_address replaced), each
  // with `streams` lanes. The first failure, naming its daemon.
  static absl::StatusOr<std::unique_ptr<DaemonSet>> Connect(
      const gdrstore::ClientOptions& options, const std::vector<std::string>& daemons,
      uint32_t streams);
  // The daemons behind `service` (HOST:PORT, HOST a DNS name): every address it resolves to,
  // resolved again every `every`. A name that does not resolve yet is no error (the storage
  // may start after the agent): ops are refused UNAVAILABLE until it does. The first
  // connection failure of an address found at start, naming it.
  static absl::StatusOr<std::unique_ptr<DaemonSet>> Discover(
      const gdrstore::ClientOptions& options, const std::string& service, absl::Duration every,
      uint32_t streams);
  // Stops the resolving thread, then closes every daemon's client.
  ~DaemonSet() override;

  absl::StatusOr<std::unique_ptr<UpstreamMemory>> Register(
      const handoff::ImportedRegion& region) override;
  uint32_t PickLane() override;
  void Submit(const ForwardedOp& op, uint32_t lane, Done done) override;
  void GetInfo(const gdrstore::v1::GetInfoRequest& request,
               std::chrono::system_clock::time_point deadline, InfoDone done) override;
  std::string Path() const override;
  uint64_t live_registrations() const override;
  absl::Status Reconnect(const gdrstore::ClientOptions& options) override;
  void Sweep() override;

 private:
  struct Memory;
  struct Registration;
  struct Waiting {
    ForwardedOp op;
    uint32_t lane;
    Done done;
  };
  struct Gathered;  // one GetInfo round over every daemon
  struct Service {
    std::string name;  // as given, HOST:PORT
    std::string host;
    uint16_t port = 0;
    absl::Duration every;
  };

  DaemonSet(const gdrstore::ClientOptions& options, uint32_t streams,
            std::optional<Service> service);
  // Connects to `address` and appends it.
  absl::Status Add(const std::string& address) ABSL_EXCLUSIVE_LOCKS_REQUIRED(change_mu_);
  // One resolution of the service: new addresses added, those gone retired.
  void Resolve() ABSL_LOCKS_EXCLUDED(change_mu_);
  void ResolveLoop();
  // Daemons added so far; slots_[i] for i below it are set (Reconnect replaces them).
  size_t Count() const { return count_.load(std::memory_order_acquire); }
  // Daemon `i`'s Upstream now (i below Count()). A holder keeps it open past a Reconnect.
  std::shared_ptr<Upstream> At(size_t i) const;
  // Sends `op` to daemon `index`.
  void Forward(size_t index, const ForwardedOp& op, uint32_t lane, Done done);
  // Routes `op` by its volume: forwards it, refuses it, or (when `may_refresh` and the volume
  // is unknown) parks it until the next GetInfo round has answered.
  void Route(const ForwardedOp& op, uint32_t lane, Done done, bool may_refresh);
  // By daemon index; nullopt for a retired daemon, which was not asked.
  using Answers = std::vector<std::optional<absl::StatusOr<gdrstore::v1::GetInfoResponse>>>;
  // Asks every daemon not retired with `ask`; `then` runs with each one's answer, in the
  // daemons' order (at once when there is none).
  void Gather(std::function<void(Upstream&, Upstream::InfoDone)> ask,
              std::function<void(Answers)> then);
  // Asks every daemon for all its volumes (every page, within `deadline`); `then` runs with
  // each one's answer, after the table was rebuilt.
  void Ask(std::chrono::system_clock::time_point deadline, std::function<void(Answers)> then);
  void Learn(const Answers& answers);
  // GetInfo's answer from each daemon's page for `request`: one page of them all.
  void JoinPages(const gdrstore::v1::GetInfoRequest& request, Answers answers,
                 const InfoDone& done) const;
  // "vol0 on 127.0.0.1:1, 127.0.0.1:2 (unreachable)": what each daemon is known to serve.
  std::string KnownLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "service NAME resolves to no address yet (why)", or "" when it is not one that has none.
  std::string NoAddressLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // More addresses than this behind one name are left out (and logged).
  static constexpr size_t kMaxDaemons = 256;
  const uint32_t streams_;
  const std::optional<Service> service_;
  // Held while daemons are added (Resolve) or reconnected, so that neither misses the other.
  absl::Mutex change_mu_;
  mutable absl::Mutex slots_mu_;
  gdrstore::ClientOptions options_ ABSL_GUARDED_BY(slots_mu_);
  // kMaxDaemons slots filled in order, published by count_.
  std::vector<std::shared_ptr<Upstream>> slots_ ABSL_GUARDED_BY(slots_mu_);
  std::atomic<size_t> count_{0};
  // Upstreams Reconnect replaced, each closed (Sweep) once it is the last holder: never on a
  // gRPC thread, where an op's callback may be what let go of it last.
  std::vector<std::shared_ptr<Upstream>> replaced_ ABSL_GUARDED_BY(slots_mu_);
  // Every region registered, for Sweep to move the idle ones off replaced Upstreams.
  const std::shared_ptr<LiveMemories<Memory>> memories_;
  absl::Notification stop_;
  std::thread resolver_;
  mutable absl::Mutex mu_;
  std::vector<bool> retired_ ABSL_GUARDED_BY(mu_);  // by index: gone from the service's answer
  std::string resolve_error_ ABSL_GUARDED_BY(mu_);  // the last resolution's, "" when it worked
  // Per daemon, the volumes it said it serves (kept when it later does not answer); a set, as
  // every op looks its volume up here and a daemon may serve many thousands.
  std::vector<std::set<std::string, std::less<>>> serves_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> last_error_ ABSL_GUARDED_BY(mu_);
  absl::Time learned_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool asking_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Waiting> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gdr::agent
