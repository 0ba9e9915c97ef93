#include "agent/daemon_set.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/volume_page.h"
#include "common/base/host_port.h"
#include "common/base/ip_address.h"
#include "common/base/log.h"
#include "common/base/socket.h"
#include "common/base/thread_name.h"

namespace gdr::agent {

namespace v1 = gdrstore::v1;

namespace {

// How often an op naming an unknown volume may make the agent ask its daemons again.
constexpr absl::Duration kRelearnEvery = absl::Seconds(1);
// A routing round's own deadline: the op waiting on it keeps its own.
constexpr std::chrono::seconds kRouteAskTimeout{2};

std::string DaemonPrefix(const Upstream& u) { return absl::StrCat("daemon ", u.address(), ": "); }

}  // namespace

// A region as one Upstream registered it. The Upstream is held so that it stays open while
// its buffer lives (declared first: it goes after the buffer).
struct DaemonSet::Registration {
  std::shared_ptr<Upstream> upstream;
  std::unique_ptr<gdrstore::Buffer> buffer;
};

struct DaemonSet::Memory final : UpstreamMemory, ReplacedRegistrations<Registration> {
  Memory(const handoff::ImportedRegion* r, std::shared_ptr<LiveMemories<Memory>> l)
      : region(r), live(std::move(l)) {}
  ~Memory() override { live->Remove(this); }

  // Outlives this: MappedRegion drops the registration before the region.
  const handoff::ImportedRegion* const region;
  const std::shared_ptr<LiveMemories<Memory>> live;
  // By daemon index; null until registered there (a daemon found after the region came), and
  // replaced at the next op once the daemon's Upstream was (Reconnect). Each op holds its own.
  mutable std::vector<std::shared_ptr<Registration>> regs ABSL_GUARDED_BY(mu);

  // Sweep: the registrations with an Upstream no longer in its daemon's slot (`current`, by
  // index) leave (TakeReplaced); those no op holds move to `*idle`.
  void TakeReplaced(const std::vector<std::shared_ptr<Upstream>>& current,
                    std::vector<std::shared_ptr<Registration>>* idle) const {
    absl::MutexLock lock(&mu);
    agent::TakeReplaced(
        std::span(regs.data(), current.size()),
        [&current](size_t i, const Registration& r) { return r.upstream != current[i]; },
        &replaced, idle);
  }
};

struct DaemonSet::Gathered {
  absl::Mutex mu;
  Answers answers;
  size_t left = 0;
  std::function<void(Answers)> then;
};

DaemonSet::DaemonSet(const gdrstore::ClientOptions& options, uint32_t streams,
                     std::optional<Service> service)
    : streams_(streams),
      service_(std::move(service)),
      memories_(std::make_shared<LiveMemories<Memory>>()) {
  {
    absl::MutexLock lock(&slots_mu_);
    options_ = options;
    slots_.resize(kMaxDaemons);
  }
  absl::MutexLock lock(&mu_);
  serves_.resize(kMaxDaemons);
  last_error_.resize(kMaxDaemons);
  retired_.resize(kMaxDaemons, false);
}

DaemonSet::~DaemonSet() {
  if (resolver_.joinable()) {
    stop_.Notify();
    resolver_.join();
  }
}

absl::StatusOr<std::unique_ptr<DaemonSet>> DaemonSet::Connect(
    const gdrstore::ClientOptions& options, const std::vector<std::string>& daemons,
    uint32_t streams) {
  if (daemons.empty()) return absl::InvalidArgumentError("no daemon to connect to");
  if (daemons.size() > kMaxDaemons) {
    return absl::InvalidArgumentError(
        absl::StrCat(daemons.size(), " daemons named; an agent serves at most ", kMaxDaemons));
  }
  std::unique_ptr<DaemonSet> set(new DaemonSet(options, streams, std::nullopt));
  absl::MutexLock change(&set->change_mu_);
  for (const std::string& address : daemons) {
    if (absl::Status st = set->Add(address); !st.ok()) return st;
  }
  return set;
}

absl::StatusOr<std::unique_ptr<DaemonSet>> DaemonSet::Discover(
    const gdrstore::ClientOptions& options, const std::string& service, absl::Duration every,
    uint32_t streams) {
  absl::StatusOr<HostPort> hp = SplitHostPort(service);
  if (!hp.ok()) return hp.status();
  std::unique_ptr<DaemonSet> set(
      new DaemonSet(options, streams, Service{service, hp->host, hp->port, every}));
  set->Resolve();
  {
    // An address that resolves but cannot be connected to (a bad RDMA device, TLS file) is
    // the configuration's fault: refused at start as a named --daemon is.
    absl::MutexLock lock(&set->mu_);
    if (set->Count() == 0 && set->resolve_error_.rfind("connect ", 0) == 0) {
      return absl::UnavailableError(set->resolve_error_);
    }
  }
  set->resolver_ = std::thread([p = set.get()] { p->ResolveLoop(); });
  return set;
}

absl::Status DaemonSet::Add(const std::string& address) {
  const size_t n = Count();
  if (n == kMaxDaemons) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "daemon ", address, " left out: an agent serves at most ", kMaxDaemons, " daemons"));
  }
  gdrstore::ClientOptions o;
  {
    absl::ReaderMutexLock lock(&slots_mu_);
    o = options_;
  }
  o.daemon_address = address;
  absl::StatusOr<std::unique_ptr<Upstream>> u = Upstream::Connect(o, streams_);
  if (!u.ok()) return u.status();
  absl::MutexLock lock(&slots_mu_);
  slots_[n] = *std::move(u);
  count_.store(n + 1, std::memory_order_release);
  return absl::OkStatus();
}

std::shared_ptr<Upstream> DaemonSet::At(size_t i) const {
  absl::ReaderMutexLock lock(&slots_mu_);
  return slots_[i];
}

absl::Status DaemonSet::Reconnect(const gdrstore::ClientOptions& options) {
  absl::MutexLock change(&change_mu_);
  // Every daemon, retired ones too (one may come back): connected before any is replaced, so
  // a file that does not pass leaves all of them as they were.
  std::vector<std::shared_ptr<Upstream>> fresh;
  for (size_t i = 0; i < Count(); ++i) {
    gdrstore::ClientOptions o = options;
    o.daemon_address = At(i)->address();
    absl::StatusOr<std::unique_ptr<Upstream>> u = Upstream::Connect(o, streams_);
    if (!u.ok()) return u.status();
    fresh.push_back(*std::move(u));
  }
  absl::MutexLock lock(&slots_mu_);
  options_ = options;
  for (size_t i = 0; i < fresh.size(); ++i) {
    replaced_.push_back(std::move(slots_[i]));
    slots_[i] = std::move(fresh[i]);
  }
  return absl::OkStatus();
}

void DaemonSet::Sweep() {
  std::vector<std::shared_ptr<Upstream>> current;
  {
    absl::ReaderMutexLock lock(&slots_mu_);
    if (!replaced_.empty()) current.assign(slots_.begin(), slots_.begin() + Count());
  }
  if (!current.empty()) {
    memories_->ForEach([&current](const Memory& m) {
      std::vector<std::shared_ptr<Registration>> idle;
      m.TakeReplaced(current, &idle);
      // Dropped here, outside the region's lock (its ops go on) and while the region is still
      // mapped (a region going waits for ForEach).
    });
    current.clear();
  }
  std::vector<std::shared_ptr<Upstream>> idle;
  {
    absl::MutexLock lock(&slots_mu_);
    // Held here alone: no op, GetInfo or region has it, and none can take it again (it is in
    // no slot).
    for (std::shared_ptr<Upstream>& u : replaced_) {
      if (u.use_count() == 1) idle.push_back(std::move(u));
    }
    std::erase(replaced_, nullptr);
  }
  for (const std::shared_ptr<Upstream>& u : idle) {
    GDR_LOG(kInfo) << "gdragent: the connection to daemon " << u->address()
                   << " that new credentials replaced is closed";
  }
}

void DaemonSet::ResolveLoop() {
  SetThreadName("gdragent-dns");
  while (!stop_.WaitForNotificationWithTimeout(service_->every)) Resolve();
}

void DaemonSet::Resolve() {
  absl::MutexLock change(&change_mu_);
  absl::StatusOr<std::vector<SocketAddress>> found = ResolveTcp(service_->host, service_->port);
  if (!found.ok()) {
    // The daemons it had are kept: a name that stops resolving for a while (no pod ready, a
    // DNS hiccup) is no reason to drop what was reachable.
    GDR_LOG_EVERY_N_SEC(kWarning, 60)
        << "gdragent: --daemon-service " << service_->name << ": " << found.status().message();
    absl::MutexLock lock(&mu_);
    resolve_error_ = std::string(found.status().message());
    return;
  }
  std::set<std::string> now;
  for (const SocketAddress& a : *found) {
    absl::StatusOr<IpAddress> ip = IpAddress::FromSockaddr(a.get(), a.length);
    if (ip.ok()) now.insert(JoinHostPort(ip->ToString(), service_->port));
  }
  std::string failed;
  bool added = false;
  for (const std::string& address : now) {
    bool known = false;
    for (size_t i = 0; i < Count(); ++i) known = known || At(i)->address() == address;
    if (known) continue;
    if (absl::Status st = Add(address); !st.ok()) {
      GDR_LOG_EVERY_N_SEC(kWarning, 60) << "gdragent: --daemon-service " << service_->name
                                        << ": " << st.message();
      failed = absl::StrCat("connect ", address, ": ", st.message());
      continue;
    }
    added = true;
    GDR_LOG(kInfo) << "gdragent: --daemon-service " << service_->name << ": daemon " << address
                   << " found";
  }
  absl::MutexLock lock(&mu_);
  resolve_error_ = failed;
  for (size_t i = 0; i < Count(); ++i) {
    const std::string address = At(i)->address();
    const bool gone = now.count(address) == 0;
    if (gone != retired_[i]) {
      GDR_LOG(kInfo) << "gdragent: --daemon-service " << service_->name << ": daemon "
                     << address << (gone ? " retired (no longer resolved)" : " resolved again");
      retired_[i] = gone;
      serves_[i].clear();
      learned_ = absl::InfinitePast();  // the next op on an unknown volume asks at once
    }
  }
  if (added) learned_ = absl::InfinitePast();
}

std::string DaemonSet::NoAddressLocked() const {
  if (!service_) return "";
  for (size_t i = 0; i < Count(); ++i) {
    if (!retired_[i]) return "";
  }
  return absl::StrCat("--daemon-service ", service_->name, " resolves to no daemon yet",
                      resolve_error_.empty() ? "" : absl::StrCat(" (", resolve_error_, ")"));
}

absl::StatusOr<std::unique_ptr<UpstreamMemory>> DaemonSet::Register(
    const handoff::ImportedRegion& region) {
  auto memory = std::make_unique<Memory>(&region, memories_);
  std::vector<bool> retired;
  {
    absl::MutexLock lock(&mu_);
    retired = retired_;
  }
  {
    absl::MutexLock lock(&memory->mu);
    memory->regs.resize(kMaxDaemons);
    for (size_t i = 0; i < Count(); ++i) {
      if (retired[i]) continue;  // registered at its first op should it come back
      std::shared_ptr<Upstream> u = At(i);
      absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> b = u->Register(region);
      if (!b.ok()) return Prefixed(DaemonPrefix(*u), b.status());
      memory->regs[i] = std::make_shared<Registration>(Registration{u, *std::move(b)});
    }
  }
  memories_->Add(memory.get());  // not under the region's lock: Sweep takes the two the other way
  return memory;
}

uint32_t DaemonSet::PickLane() { return Count() == 0 ? 0 : At(0)->PickLane(); }

void DaemonSet::Submit(const ForwardedOp& op, uint32_t lane, Done done) {
  if (!service_ && Count() == 1) {
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
    for (size_t i = 0; i < Count(); ++i) {
      if (!retired_[i] && serves_[i].count(op.extent.volume) != 0) hits.push_back(i);
    }
    if (const std::string none = NoAddressLocked(); !none.empty()) {
      known = none;
    } else if (hits.empty()) {
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
  if (hits.empty() && service_ && known.rfind("--daemon-service", 0) == 0) {
    done(absl::UnavailableError(known));
    return;
  }
  if (hits.empty()) {
    done(absl::NotFoundError(absl::StrCat("no daemon of this agent serves volume '",
                                          op.extent.volume, "' (", known, ")")));
    return;
  }
  std::vector<std::string> names;
  for (size_t i : hits) names.push_back(At(i)->address());
  done(absl::FailedPreconditionError(absl::StrCat(
      "volume '", op.extent.volume, "' is served by daemons ", absl::StrJoin(names, " and "),
      ": an agent sends a volume to one daemon (name them apart, or join the daemons as a "
      "cluster and run the agent with --cluster)")));
}

void DaemonSet::Forward(size_t index, const ForwardedOp& op, uint32_t lane, Done done) {
  std::shared_ptr<Upstream> u = At(index);
  std::shared_ptr<Registration> reg;
  {
    const Memory& m = *static_cast<const Memory*>(op.memory);
    absl::MutexLock lock(&m.mu);
    std::shared_ptr<Registration>& slot = m.regs[index];
    if (slot == nullptr || slot->upstream != u) {
      // A daemon found after the region was registered, or reconnected since (new
      // credentials): registered with its Upstream now, once.
      absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> b = u->Register(*m.region);
      if (!b.ok()) {
        done(Prefixed(DaemonPrefix(*u), b.status()));
        return;
      }
      if (slot != nullptr) m.replaced.push_back(std::move(slot));
      slot = std::make_shared<Registration>(Registration{u, *std::move(b)});
    }
    DropUnheld(&m.replaced);
    reg = slot;
  }
  UpstreamOp up;
  up.kind = op.kind;
  up.extent = op.extent;
  up.buffer = reg->buffer.get();
  up.offset = op.offset;
  up.crc32c = op.crc32c;
  up.deadline = op.deadline;
  Upstream& to = *u;
  const Memory* m = static_cast<const Memory*>(op.memory);  // lives until `done` has run
  to.Submit(up, lane, [m, reg = std::move(reg), u = std::move(u),
                       done = std::move(done)](absl::StatusOr<gdrstore::OpResult> r) mutable {
    if (!r.ok()) r = Prefixed(DaemonPrefix(*u), r.status());
    m->Release(&reg);
    done(std::move(r));
  });
}

void DaemonSet::Gather(std::function<void(Upstream&, Upstream::InfoDone)> ask,
                       std::function<void(Answers)> then) {
  std::vector<size_t> asked;
  size_t n = 0;
  {
    absl::MutexLock lock(&mu_);
    n = Count();
    for (size_t i = 0; i < n; ++i) {
      if (!retired_[i]) asked.push_back(i);
    }
  }
  auto g = std::make_shared<Gathered>();
  g->answers.resize(n);
  g->left = asked.size();
  g->then = std::move(then);
  if (asked.empty()) {
    g->then(std::move(g->answers));
    return;
  }
  for (size_t i : asked) {
    // The callback holds the Upstream: a Reconnect meanwhile does not close it under the call.
    std::shared_ptr<Upstream> u = At(i);
    ask(*u, [g, i, u](absl::StatusOr<v1::GetInfoResponse> r) {
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
    if (!answers[i].has_value() || retired_[i]) continue;
    const absl::StatusOr<v1::GetInfoResponse>& a = *answers[i];
    if (!a.ok()) {
      last_error_[i] = std::string(a.status().message());
      continue;  // what it served before is still its
    }
    last_error_[i].clear();
    serves_[i].clear();
    for (const v1::VolumeInfo& v : a->volumes()) serves_[i].insert(v.name());
  }
  learned_ = absl::Now();
}

std::string DaemonSet::KnownLocked() const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < Count(); ++i) {
    if (retired_[i]) continue;
    std::string line = absl::StrCat(At(i)->address(), " serves ");
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
  size_t asked = 0;
  const absl::Status* only = nullptr;  // the error of the one daemon asked
  for (size_t i = 0; i < answers.size(); ++i) {
    if (!answers[i].has_value()) continue;  // retired
    ++asked;
    const std::shared_ptr<Upstream> up = At(i);
    const Upstream& u = *up;
    absl::StatusOr<v1::GetInfoResponse>& answer = *answers[i];
    if (!answer.ok()) {
      only = &answer.status();
      paths.push_back(absl::StrCat(u.Path(), " [unreachable: ", answer.status().message(),
                                   "]"));
      failures.push_back(absl::StrCat(DaemonPrefix(u), answer.status().message()));
      continue;
    }
    const std::string& next = answer->next_volumes_after();
    if (!next.empty() && (known_through.empty() || next < known_through)) known_through = next;
    std::vector<std::string> names;
    for (v1::VolumeInfo& v : *answer->mutable_volumes()) {
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
    const v1::Limits& l = answer->limits();
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
    if (asked == 0) {
      absl::MutexLock lock(&mu_);
      done(absl::UnavailableError(NoAddressLocked()));
      return;
    }
    // One daemon: its own error, as it said it; several: each one's.
    done(asked == 1 && !service_
             ? Prefixed(DaemonPrefix(*At(0)), *only)
             : absl::UnavailableError(absl::StrCat("no daemon answered: ",
                                                   absl::StrJoin(failures, "; "))));
    return;
  }
  FillVolumePage(std::move(volumes), request, known_through, &out.info);
  out.paths = absl::StrJoin(paths, "; ");
  if (service_) out.paths = absl::StrCat("--daemon-service ", service_->name, ": ", out.paths);
  done(std::move(out));
}

std::string DaemonSet::Path() const {
  std::vector<std::string> paths;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < Count(); ++i) {
    if (!retired_[i]) paths.push_back(At(i)->Path());
  }
  if (!service_) return absl::StrJoin(paths, "; ");
  if (paths.empty()) return NoAddressLocked();
  return absl::StrCat("--daemon-service ", service_->name, ": ", absl::StrJoin(paths, "; "));
}

uint64_t DaemonSet::live_registrations() const {
  uint64_t n = 0;
  absl::ReaderMutexLock lock(&slots_mu_);
  for (size_t i = 0; i < Count(); ++i) n += slots_[i]->live_registrations();
  for (const std::shared_ptr<Upstream>& u : replaced_) n += u->live_registrations();
  return n;
}

}  // namespace gdr::agent
