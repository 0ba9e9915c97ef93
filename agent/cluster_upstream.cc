#include "agent/cluster_upstream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/volume_page.h"
#include "common/base/log.h"
#include "common/base/thread_name.h"

namespace gdr::agent {

namespace v1 = gdrstore::v1;

// A region as one ClusterClient registered it, the client held open while its buffer lives
// (declared first: it goes after the buffer).
struct ClusterUpstream::Registration {
  std::shared_ptr<gdrstore::ClusterClient> cluster;
  std::unique_ptr<gdrstore::ClusterBuffer> buffer;

  static absl::StatusOr<std::shared_ptr<Registration>> Make(
      std::shared_ptr<gdrstore::ClusterClient> cluster, const handoff::ImportedRegion& region) {
    absl::StatusOr<std::unique_ptr<gdrstore::ClusterBuffer>> b =
        region.gpu() ? cluster->RegisterGpuMemory(region.device_ptr(), region.size())
                     : cluster->RegisterHostMemory(region.host(), region.size());
    if (!b.ok()) return b.status();
    return std::make_shared<Registration>(Registration{std::move(cluster), *std::move(b)});
  }
};

struct ClusterUpstream::Memory final : UpstreamMemory, ReplacedRegistrations<Registration> {
  Memory(const handoff::ImportedRegion* r, std::shared_ptr<Registration> first,
         std::shared_ptr<std::atomic<uint64_t>> n, std::shared_ptr<LiveMemories<Memory>> all)
      : region(r), live(std::move(n)), memories(std::move(all)), reg(std::move(first)) {
    live->fetch_add(1);
  }
  ~Memory() override {
    memories->Remove(this);
    live->fetch_sub(1);
  }

  // The registration with `cluster`: the one made before, or (a Reconnect since: Sweep may
  // have dropped it) a new one. Each op holds its own until it is answered.
  absl::StatusOr<std::shared_ptr<Registration>> With(
      const std::shared_ptr<gdrstore::ClusterClient>& cluster) const {
    absl::MutexLock lock(&mu);
    if (reg == nullptr || reg->cluster != cluster) {
      absl::StatusOr<std::shared_ptr<Registration>> r = Registration::Make(cluster, *region);
      if (!r.ok()) return r.status();
      if (reg != nullptr) replaced.push_back(std::move(reg));
      reg = *std::move(r);
    }
    DropUnheld(&replaced);
    return reg;
  }

  // Sweep: a registration with another client than `current` leaves (TakeReplaced); those no
  // op holds move to `*idle`.
  void TakeReplaced(const std::shared_ptr<gdrstore::ClusterClient>& current,
                    std::vector<std::shared_ptr<Registration>>* idle) const {
    absl::MutexLock lock(&mu);
    agent::TakeReplaced(
        std::span(&reg, 1),
        [&current](size_t, const Registration& r) { return r.cluster != current; }, &replaced,
        idle);
  }

  // Outlives this: MappedRegion drops the registration before the region.
  const handoff::ImportedRegion* region;
  std::shared_ptr<std::atomic<uint64_t>> live;
  const std::shared_ptr<LiveMemories<Memory>> memories;
  // Null once Sweep dropped it (registered anew at the next op).
  mutable std::shared_ptr<Registration> reg ABSL_GUARDED_BY(mu);
};

ClusterUpstream::ClusterUpstream(std::unique_ptr<gdrstore::ClusterClient> cluster,
                                 gdrstore::ClusterOptions options) {
  absl::MutexLock lock(&cluster_mu_);
  cluster_ = std::move(cluster);
  options_ = std::move(options);
}

std::shared_ptr<gdrstore::ClusterClient> ClusterUpstream::Current() const {
  absl::ReaderMutexLock lock(&cluster_mu_);
  return cluster_;
}

absl::Status ClusterUpstream::Reconnect(const gdrstore::ClientOptions& options) {
  gdrstore::ClusterOptions o;
  {
    absl::ReaderMutexLock lock(&cluster_mu_);
    o = options_;
  }
  o.client = options;
  absl::StatusOr<std::unique_ptr<gdrstore::ClusterClient>> c = gdrstore::ClusterClient::Open(o);
  if (!c.ok()) return Prefixed(Prefix(), c.status());
  absl::MutexLock lock(&cluster_mu_);
  replaced_.push_back(std::move(cluster_));
  cluster_ = *std::move(c);
  options_ = std::move(o);
  return absl::OkStatus();
}

void ClusterUpstream::Sweep() {
  std::shared_ptr<gdrstore::ClusterClient> current;
  {
    absl::ReaderMutexLock lock(&cluster_mu_);
    if (!replaced_.empty()) current = cluster_;
  }
  if (current != nullptr) {
    memories_->ForEach([&current](const Memory& m) {
      std::vector<std::shared_ptr<Registration>> idle;
      m.TakeReplaced(current, &idle);
      // Dropped here, outside the region's lock and while the region is still mapped.
    });
    current.reset();
  }
  std::vector<std::shared_ptr<gdrstore::ClusterClient>> idle;
  {
    absl::MutexLock lock(&cluster_mu_);
    // Held here alone: no op or region has it, and none can take it again.
    for (std::shared_ptr<gdrstore::ClusterClient>& c : replaced_) {
      if (c.use_count() == 1) idle.push_back(std::move(c));
    }
    std::erase(replaced_, nullptr);
  }
  for (const std::shared_ptr<gdrstore::ClusterClient>& c : idle) {
    GDR_LOG(kInfo) << "gdragent: the connections to cluster " << c->source()
                   << " that new credentials replaced are closed";
  }
}

absl::StatusOr<std::unique_ptr<ClusterUpstream>> ClusterUpstream::Open(
    const gdrstore::ClusterOptions& options, uint32_t workers) {
  absl::StatusOr<std::unique_ptr<gdrstore::ClusterClient>> c =
      gdrstore::ClusterClient::Open(options);
  if (!c.ok()) {
    return absl::Status(c.status().code(),
                        absl::StrCat("cluster ", options.etcd_url.empty() ? options.members_file
                                                                          : options.etcd_url,
                                     ": ", c.status().message()));
  }
  std::unique_ptr<ClusterUpstream> up(new ClusterUpstream(*std::move(c), options));
  for (uint32_t i = 0; i < std::max(workers, 1u); ++i) {
    up->workers_.emplace_back([p = up.get()] { p->Work(); });
  }
  return up;
}

ClusterUpstream::~ClusterUpstream() {
  std::deque<Task> left;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    left.swap(queue_);
  }
  for (Task& t : left) t.abandon();
  for (std::thread& t : workers_) t.join();
  absl::MutexLock lock(&cluster_mu_);
  cluster_.reset();
  replaced_.clear();
}

std::string ClusterUpstream::Prefix() const {
  return absl::StrCat("cluster ", Current()->source(), ": ");
}

void ClusterUpstream::Post(Task task) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      queue_.push_back(std::move(task));
      return;
    }
  }
  task.abandon();
}

void ClusterUpstream::Work() {
  SetThreadName("gdragent-clus");
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !queue_.empty();
  };
  for (;;) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task.run();
  }
}

absl::StatusOr<std::unique_ptr<UpstreamMemory>> ClusterUpstream::Register(
    const handoff::ImportedRegion& region) {
  absl::StatusOr<std::shared_ptr<Registration>> r = Registration::Make(Current(), region);
  if (!r.ok()) return Prefixed(Prefix(), r.status());
  auto memory = std::make_unique<Memory>(&region, *std::move(r), live_, memories_);
  memories_->Add(memory.get());
  return memory;
}

void ClusterUpstream::Submit(const ForwardedOp& op, uint32_t lane, Done done) {
  // What a cluster op cannot carry is refused, never dropped silently.
  if (op.crc32c) {
    done(Prefixed(Prefix(), absl::UnimplementedError(
                                "an op's crc32c is not offered through a cluster (its pieces "
                                "come from several members); ask without it")));
    return;
  }
  if (op.kind == gdrstore::OpKind::kReadSync) {
    done(Prefixed(Prefix(), absl::UnimplementedError(
                                "sync puts are not offered through a cluster yet; ask without "
                                "sync")));
    return;
  }
  auto deadline = op.deadline;
  if (deadline == std::chrono::system_clock::time_point::max()) {
    absl::ReaderMutexLock lock(&cluster_mu_);
    deadline = std::chrono::system_clock::now() + options_.client.rpc_timeout;
  }
  auto shared = std::make_shared<Done>(std::move(done));
  Post(Task{
      [this, op, deadline, shared] {
        if (std::chrono::system_clock::now() > deadline) {
          (*shared)(Prefixed(Prefix(), absl::DeadlineExceededError(
                                           "the op waited for a cluster worker past its "
                                           "deadline; not sent")));
          return;
        }
        const Memory& memory = *static_cast<const Memory*>(op.memory);
        absl::StatusOr<std::shared_ptr<Registration>> with = memory.With(Current());
        if (!with.ok()) {
          (*shared)(Prefixed(Prefix(), with.status()));
          return;
        }
        std::shared_ptr<Registration> reg = *std::move(with);
        gdrstore::ClusterClient& cluster = *reg->cluster;
        const gdrstore::ClusterBuffer& buffer = *reg->buffer;
        const auto start = std::chrono::steady_clock::now();
        // kWrite: the store's bytes into the client's memory (a get); kRead: a put. The op's
        // deadline bounds the cluster op too, failovers included, not a fresh rpc_timeout.
        const gdrstore::OpOptions options{.deadline = deadline};
        const absl::Status st =
            op.kind == gdrstore::OpKind::kWrite
                ? cluster.Get(op.extent.volume, op.extent.offset, op.extent.length, buffer,
                              op.offset, options)
                : cluster.Put(op.extent.volume, op.extent.offset, op.extent.length, buffer,
                              op.offset, options);
        const std::string path = st.ok() ? cluster.PathOf(buffer) : "";
        memory.Release(&reg);  // before answering: the memory may go once the op is answered
        if (!st.ok()) {
          (*shared)(Prefixed(Prefix(), st));
          return;
        }
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count();
        (*shared)(gdrstore::OpResult{op.extent.length, static_cast<uint64_t>(ns), false,
                                     std::nullopt, path});
      },
      [this, shared] {
        (*shared)(Prefixed(Prefix(), absl::UnavailableError("the agent is stopping")));
      }});
}

void ClusterUpstream::GetInfo(const v1::GetInfoRequest& request,
                              std::chrono::system_clock::time_point deadline, InfoDone done) {
  auto shared = std::make_shared<InfoDone>(std::move(done));
  Post(Task{
      [this, request, deadline, shared] {
        if (std::chrono::system_clock::now() > deadline) {
          (*shared)(Prefixed(Prefix(), absl::DeadlineExceededError(
                                           "waited for a cluster worker past the deadline")));
          return;
        }
        UpstreamInfo out;
        std::vector<v1::VolumeInfo> volumes;
        const std::shared_ptr<gdrstore::ClusterClient> cluster = Current();
        for (const v1::ClusterVolume& v : cluster->Volumes()) {
          v1::VolumeInfo& info = volumes.emplace_back();
          info.set_name(v.name());
          info.set_size(v.size());
          info.set_backing(absl::StrCat("cluster: ", v.members_size(), " members, stripe unit ",
                                        v.stripe_unit(), ", ", v.replicas(), " replicas"));
        }
        FillVolumePage(std::move(volumes), request, "", &out.info);
        std::vector<std::string> members;
        for (const gdrstore::ClusterMemberStatus& m : cluster->Members()) {
          members.push_back(absl::StrCat(
              m.entry.id(), " at ", m.entry.address(),
              m.healthy ? " (healthy)" : absl::StrCat(" (", m.error.empty() ? "absent" : m.error,
                                                      ")")));
        }
        out.paths = absl::StrCat(Path(), ": members ",
                                 members.empty() ? "none" : absl::StrJoin(members, ", "));
        (*shared)(std::move(out));
      },
      [this, shared] {
        (*shared)(Prefixed(Prefix(), absl::UnavailableError("the agent is stopping")));
      }});
}

std::string ClusterUpstream::Path() const {
  absl::ReaderMutexLock lock(&cluster_mu_);
  return absl::StrCat("agent -> cluster ", cluster_->source(), " over ",
                      gdrstore::TransportName(options_.client.transport));
}

}  // namespace gdr::agent
