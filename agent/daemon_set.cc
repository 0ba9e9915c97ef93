#include "agent/daemon_set.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/volume_page.h"

namespace gdr::agent {

namespace v1 = gdrstore::v1;

namespace {

// How often an op naming an unknown volume may make the agent ask its daemons again.
constexpr absl::Duration kRelearnEvery = absl::Seconds(1);
// A routing round's own deadline: the op waiting on it keeps its own.
constexpr std::chrono::seconds kRouteAskTimeout{2};

std::string DaemonPrefix(const Upstream& u) { return absl::StrCat("daemon ", u.address(), ": "); }

}  // namespace

struct DaemonSet::Memory final : UpstreamMemory {
  std::vector<std::unique_ptr<gdrstore::Buffer>> buffers;  // one per daemon, in their order
};

struct DaemonSet::Gathered {
  absl::Mutex mu;
  Answers answers;
  size_t left = 0;
  std::function<void(Answers)> then;
};

DaemonSet::DaemonSet(std::vector<std::unique_ptr<Upstream>> daemons)
    : daemons_(std::move(daemons)) {
  absl::MutexLock lock(&mu_);
  serves_.resize(daemons_.size());
  last_error_.resize(daemons_.size());
}

DaemonSet::~DaemonSet() = default;

absl::StatusOr<std::unique_ptr<DaemonSet>> DaemonSet::Connect(
    const gdrstore::ClientOptions& options, const std::vector<std::string>& daemons,
    uint32_t streams) {
  if (daemons.empty()) return absl::InvalidArgumentError("no daemon to connect to");
  std::vector<std::unique_ptr<Upstream>> ups;
  for (const std::string& address : daemons) {
    gdrstore::ClientOptions o = options;
    o.daemon_address = address;
    absl::StatusOr<std::unique_ptr<Upstream>> u = Upstream::Connect(o, streams);
    if (!u.ok()) return u.status();
    ups.push_back(*std::move(u));
  }
  return std::unique_ptr<DaemonSet>(new DaemonSet(std::move(ups)));
}

absl::StatusOr<std::unique_ptr<UpstreamMemory>> DaemonSet::Register(
    const handoff::ImportedRegion& region) {
  auto memory = std::make_unique<Memory>();
  for (const std::unique_ptr<Upstream>& u : daemons_) {
    absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> b = u->Register(region);
    if (!b.ok()) return Prefixed(DaemonPrefix(*u), b.status());
    memory->buffers.push_back(*std::move(b));
  }
  return memory;
}

uint32_t DaemonSet::PickLane() { return daemons_.front()->PickLane(); }

void DaemonSet::Submit(const ForwardedOp& op, uint32_t lane, Done done) {
  if (daemons_.size() == 1) {
    Forward(0, op, lane, std::move(done));  // it answers for every volume itself
    return;
  }
  Route(op, lane, std::move(done), /*may_refresh=*/true);
}

void DaemonSet::Route(const ForwardedOp& op, uint32_t lane, Done done, bool may_refresh) {
  std::vector<size_t> hits;
  std::string known;
  bool ask = false, parked = false;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < serves_.size(); ++i) {
      if (serves_[i].count(op.extent.volume) != 0) hits.push_back(i);
    }
    if (hits.empty()) {
      if (may_refresh && (asking_ || absl::Now() - learned_ >= kRelearnEvery)) {
        waiting_.push_back(Waiting{op, lane, std::move(done)});
        parked = true;
        ask = !asking_;
        asking_ = true;
      } else {
        known = KnownLocked();
      }
    }
  }
  if (parked) {
    if (!ask) return;  // the round under way takes it along
    Ask(std::chrono::system_clock::now() + kRouteAskTimeout,
        [this](Answers) {
          std::vector<Waiting> ready;
          {
            absl::MutexLock lock(&mu_);
            ready.swap(waiting_);
            asking_ = false;
          }
          for (Waiting& w : ready) Route(w.op, w.lane, std::move(w.done), false);
        });
    return;
  }
  if (hits.size() == 1) {
    Forward(hits.front(), op, lane, std::move(done));
    return;
  }
  if (hits.empty()) {
    done(absl::NotFoundError(absl::StrCat("no daemon of this agent serves volume '",
                                          op.extent.volume, "' (", known, ")")));
    return;
  }
  std::vector<std::string> names;
  for (size_t i : hits) names.push_back(daemons_[i]->address());
  done(absl::FailedPreconditionError(absl::StrCat(
      "volume '", op.extent.volume, "' is served by daemons ", absl::StrJoin(names, " and "),
      ": an agent sends a volume to one daemon (name them apart, or join the daemons as a "
      "cluster and run the agent with --cluster)")));
}

void DaemonSet::Forward(size_t index, const ForwardedOp& op, uint32_t lane, Done done) {
  Upstream& u = *daemons_[index];
  UpstreamOp up;
  up.kind = op.kind;
  up.extent = op.extent;
  up.buffer = static_cast<const Memory*>(op.memory)->buffers[index].get();
  up.offset = op.offset;
  up.crc32c = op.crc32c;
  up.deadline = op.deadline;
  u.Submit(up, lane, [&u, done = std::move(done)](absl::StatusOr<gdrstore::OpResult> r) {
    if (!r.ok()) r = Prefixed(DaemonPrefix(u), r.status());
    done(std::move(r));
  });
}

void DaemonSet::Gather(std::function<void(Upstream&, Upstream::InfoDone)> ask,
                       std::function<void(Answers)> then) {
  auto g = std::make_shared<Gathered>();
  g->answers.resize(daemons_.size(), absl::UnknownError("not asked"));
  g->left = daemons_.size();
  g->then = std::move(then);
  for (size_t i = 0; i < daemons_.size(); ++i) {
    ask(*daemons_[i], [g, i](absl::StatusOr<v1::GetInfoResponse> r) {
      {
        absl::MutexLock lock(&g->mu);
        g->answers[i] = std::move(r);
        if (--g->left != 0) return;
      }
      g->then(std::move(g->answers));
    });
  }
}

void DaemonSet::Ask(std::chrono::system_clock::time_point deadline,
                    std::function<void(Answers)> then) {
  Gather(
      [deadline](Upstream& u, Upstream::InfoDone done) {
        u.GetAllInfo(deadline, std::move(done));
      },
      [this, then = std::move(then)](Answers answers) {
        Learn(answers);
        then(std::move(answers));
      });
}

void DaemonSet::Learn(const Answers& answers) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < answers.size(); ++i) {
    if (!answers[i].ok()) {
      last_error_[i] = std::string(answers[i].status().message());
      continue;  // what it served before is still its
    }
    last_error_[i].clear();
    serves_[i].clear();
    for (const v1::VolumeInfo& v : answers[i]->volumes()) serves_[i].insert(v.name());
  }
  learned_ = absl::Now();
}

std::string DaemonSet::KnownLocked() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < daemons_.size(); ++i) {
    std::string line = absl::StrCat(daemons_[i]->address(), " serves ");
    absl::StrAppend(&line, serves_[i].empty() ? "nothing known" : NamesInBrief(serves_[i]));
    if (!last_error_[i].empty()) absl::StrAppend(&line, " (unreachable: ", last_error_[i], ")");
    parts.push_back(std::move(line));
  }
  return absl::StrJoin(parts, "; ");
}

void DaemonSet::GetInfo(const v1::GetInfoRequest& request,
                        std::chrono::system_clock::time_point deadline, InfoDone done) {
  // Each daemon's page from the same cursor, joined into one page here (FillVolumePage). The
  // routing table is not touched: it takes every page (Ask).
  Gather(
      [request, deadline](Upstream& u, Upstream::InfoDone d) {
        u.GetInfo(request, deadline, std::move(d));
      },
      [this, request, done = std::move(done)](Answers answers) {
        JoinPages(request, std::move(answers), done);
      });
}

void DaemonSet::JoinPages(const v1::GetInfoRequest& request, Answers answers,
                          const InfoDone& done) const {
  UpstreamInfo out;
  std::vector<std::string> paths, failures;
  std::vector<v1::VolumeInfo> volumes;
  // Past the smallest cursor of a daemon with more, not every daemon's names are known yet.
  std::string known_through;
  bool any = false;
  for (size_t i = 0; i < answers.size(); ++i) {
    const Upstream& u = *daemons_[i];
    if (!answers[i].ok()) {
      paths.push_back(absl::StrCat(u.Path(), " [unreachable: ", answers[i].status().message(),
                                   "]"));
      failures.push_back(absl::StrCat(DaemonPrefix(u), answers[i].status().message()));
      continue;
    }
    const std::string& next = answers[i]->next_volumes_after();
    if (!next.empty() && (known_through.empty() || next < known_through)) known_through = next;
    std::vector<std::string> names;
    for (v1::VolumeInfo& v : *answers[i]->mutable_volumes()) {
      names.push_back(v.name());
      volumes.push_back(std::move(v));
    }
    if (request.no_volumes()) {
      paths.push_back(u.Path());
    } else {
      paths.push_back(absl::StrCat(u.Path(), " [volumes ", NamesInBrief(names),
                                   next.empty() ? "" : " and more", "]"));
    }
    // The strictest of the daemons' limits: an op may go to any of them.
    const v1::Limits& l = answers[i]->limits();
    v1::Limits* m = out.info.mutable_limits();
    if (!any) {
      *m = l;
    } else {
      auto tighter = [](uint64_t a, uint64_t b) {
        return a == 0 ? b : (b == 0 ? a : std::min(a, b));
      };
      m->set_max_op_bytes(tighter(m->max_op_bytes(), l.max_op_bytes()));
      m->set_max_inflight_ops(
          static_cast<uint32_t>(tighter(m->max_inflight_ops(), l.max_inflight_ops())));
      m->set_max_inflight_per_stream(static_cast<uint32_t>(
          tighter(m->max_inflight_per_stream(), l.max_inflight_per_stream())));
      m->set_max_inflight_bytes(tighter(m->max_inflight_bytes(), l.max_inflight_bytes()));
    }
    any = true;
  }
  if (!any) {
    // One daemon: its own error, as it said it; several: each one's.
    done(daemons_.size() == 1
             ? Prefixed(DaemonPrefix(*daemons_.front()), answers.front().status())
             : absl::UnavailableError(absl::StrCat("no daemon answered: ",
                                                   absl::StrJoin(failures, "; "))));
    return;
  }
  FillVolumePage(std::move(volumes), request, known_through, &out.info);
  out.paths = absl::StrJoin(paths, "; ");
  done(std::move(out));
}

std::string DaemonSet::Path() const {
  std::vector<std::string> paths;
  for (const std::unique_ptr<Upstream>& u : daemons_) paths.push_back(u->Path());
  return absl::StrJoin(paths, "; ");
}

uint64_t DaemonSet::live_registrations() const {
  uint64_t n = 0;
  for (const std::unique_ptr<Upstream>& u : daemons_) n += u->live_registrations();
  return n;
}

}  // namespace gdr::agent
