// The agent's storage daemons when named one by one (--daemon, repeatable): one Upstream each,
// every region registered with each of them, and each op sent to the daemon that serves its
// volume. Which daemon serves what comes from their GetInfo (every page), asked again (at most
// once a second) when an op names a volume none is known to serve, so a daemon that was down
// when the agent started is found once it is up. A volume two daemons serve is refused, not
// guessed.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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
  ~DaemonSet() override;

  absl::StatusOr<std::unique_ptr<UpstreamMemory>> Register(
      const handoff::ImportedRegion& region) override;
  uint32_t PickLane() override;
  void Submit(const ForwardedOp& op, uint32_t lane, Done done) override;
  void GetInfo(const gdrstore::v1::GetInfoRequest& request,
               std::chrono::system_clock::time_point deadline, InfoDone done) override;
  std::string Path() const override;
  uint64_t live_registrations() const override;

 private:
  struct Memory;
  struct Waiting {
    ForwardedOp op;
    uint32_t lane;
    Done done;
  };
  struct Gathered;  // one GetInfo round over every daemon

  explicit DaemonSet(std::vector<std::unique_ptr<Upstream>> daemons);
  // Sends `op` to daemon `index`.
  void Forward(size_t index, const ForwardedOp& op, uint32_t lane, Done done);
  // Routes `op` by its volume: forwards it, refuses it, or (when `may_refresh` and the volume
  // is unknown) parks it until the next GetInfo round has answered.
  void Route(const ForwardedOp& op, uint32_t lane, Done done, bool may_refresh);
  using Answers = std::vector<absl::StatusOr<gdrstore::v1::GetInfoResponse>>;
  // Asks every daemon with `ask`; `then` runs with each one's answer, in the daemons' order.
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

  const std::vector<std::unique_ptr<Upstream>> daemons_;
  mutable absl::Mutex mu_;
  // Per daemon, the volumes it said it serves (kept when it later does not answer); a set, as
  // every op looks its volume up here and a daemon may serve many thousands.
  std::vector<std::set<std::string, std::less<>>> serves_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> last_error_ ABSL_GUARDED_BY(mu_);
  absl::Time learned_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool asking_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Waiting> waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gdr::agent
