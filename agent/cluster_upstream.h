// The agent's upstream when it serves a cluster of daemons (--cluster etcd://... or
// --cluster-file): one gdrstore::ClusterClient, which splits each op by stripe over the members
// and keeps replicas. Its calls block until every piece is answered, so a fixed pool of workers
// runs them and no gRPC thread waits; an op a worker takes after its deadline is answered
// DEADLINE_EXCEEDED without being sent. Each region is registered with the cluster's one
// transport at REGISTER, through its first member (a gdrstore::Buffer; a member must answer).
// New credentials (Reconnect: the members' token and TLS, etcd's TLS) open a new
// ClusterClient that takes every later op; ops running finish on the old one, which closes
// (Sweep) once no op holds it (Sweep drops an idle region's registration on it first); each
// region is registered anew at its next op.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/upstreams.h"
#include "gdrstore/cluster.h"

namespace gdr::agent {

class ClusterUpstream final : public Upstreams {
 public:
  // Opens the cluster (reads its members and layouts) and starts `workers` threads. The
  // cluster client's error (a URL or file that does not parse, etcd not answering).
  static absl::StatusOr<std::unique_ptr<ClusterUpstream>> Open(
      const gdrstore::ClusterOptions& options, uint32_t workers);
  // Lets the workers finish the ops they run; ops still queued are answered UNAVAILABLE.
  ~ClusterUpstream() override;

  absl::StatusOr<std::unique_ptr<UpstreamMemory>> Register(
      const handoff::ImportedRegion& region) override;
  uint32_t PickLane() override { return 0; }
  void Submit(const ForwardedOp& op, uint32_t lane, Done done) override;
  void GetInfo(const gdrstore::v1::GetInfoRequest& request,
               std::chrono::system_clock::time_point deadline, InfoDone done) override;
  std::string Path() const override;
  uint64_t live_registrations() const override { return live_->load(); }
  // The cluster opened again with `options` as its members' ClientOptions (etcd's TLS files
  // read again too); ClusterClient::Open's error keeps the running one.
  absl::Status Reconnect(const gdrstore::ClientOptions& options) override;
  void Sweep() override;

 private:
  struct Memory;
  struct Registration;
  struct Task {
    std::function<void()> run;      // on a worker
    std::function<void()> abandon;  // never run: the agent is stopping
  };
  ClusterUpstream(std::unique_ptr<gdrstore::ClusterClient> cluster,
                  gdrstore::ClusterOptions options);
  void Post(Task task);
  void Work();
  // The cluster client ops go to now; a holder keeps it open past a Reconnect.
  std::shared_ptr<gdrstore::ClusterClient> Current() const;
  std::string Prefix() const;

  mutable absl::Mutex cluster_mu_;
  std::shared_ptr<gdrstore::ClusterClient> cluster_ ABSL_GUARDED_BY(cluster_mu_);
  gdrstore::ClusterOptions options_ ABSL_GUARDED_BY(cluster_mu_);
  // Replaced by Reconnect, each closed by Sweep once it is the last holder.
  std::vector<std::shared_ptr<gdrstore::ClusterClient>> replaced_ ABSL_GUARDED_BY(cluster_mu_);
  // Shared with the regions, which may outlive a Submit's caller but not the cluster client.
  std::shared_ptr<std::atomic<uint64_t>> live_ = std::make_shared<std::atomic<uint64_t>>(0);
  // Every region registered, for Sweep to move the idle ones off replaced clients.
  const std::shared_ptr<LiveMemories<Memory>> memories_ =
      std::make_shared<LiveMemories<Memory>>();
  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace gdr::agent
