// ClusterClient: an op on a cluster volume is split by stripe (layout.h), each piece sent over
// the Stream of the member holding it (member_link.h); members and layouts come from etcd or a
// file (membership.h).
#include "gdrstore/cluster.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/src/client_access.h"
#include "client/src/cluster/layout.h"
#include "client/src/cluster/member_link.h"
#include "client/src/cluster/membership.h"
#include "client/src/deadline_timer.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/grpc/tls_material.h"

namespace gdrstore {

namespace cl = gdr::cluster;

namespace {

// Errors that say the member, not the request, is at fault: another replica may serve.
bool MemberFault(const absl::Status& st) {
  switch (st.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

// The etcd TLS files checked before any connection, named as this library's callers give them
// (the etcd client's own errors speak of the daemon's flags). A file that cannot be read is
// as much a bad option as one holding no PEM: INVALID_ARGUMENT either way.
absl::Status CheckEtcdTls(const ClusterOptions& o) {
  if (o.etcd_tls_ca.empty() && o.etcd_tls_cert.empty() && o.etcd_tls_key.empty()) {
    return absl::OkStatus();
  }
  if (o.etcd_url.empty()) {
    return absl::InvalidArgumentError(
        "etcd_tls_ca/etcd_tls_cert/etcd_tls_key (--cluster-tls-*) are for etcd: a members file "
        "has no etcd to take them");
  }
  absl::StatusOr<gdr::TlsMaterial> m = gdr::TlsMaterial::Load(
      {o.etcd_tls_cert, o.etcd_tls_key, o.etcd_tls_ca}, "etcd_tls_cert (--cluster-tls-cert)",
      "etcd_tls_key (--cluster-tls-key)", "etcd_tls_ca (--cluster-tls-ca)");
  if (!m.ok()) return absl::InvalidArgumentError(m.status().message());
  return absl::OkStatus();
}

}  // namespace

struct ClusterClient::State {
  ClusterOptions options;
  std::unique_ptr<cl::Membership> membership;

  struct Member {
    std::shared_ptr<cl::MemberLink> link;  // nullptr until first used, or after a fault
    std::chrono::steady_clock::time_point passed_over_until{};
    std::string last_error;
    std::atomic<uint64_t> ops{0}, bytes{0}, errors{0};
  };
  std::mutex mu;
  std::map<std::string, std::unique_ptr<Member>> members;
  // Links given up on stay alive (streams closing) until the end.
  std::vector<std::shared_ptr<cl::MemberLink>> retired;
  // The first link connected: its Client opened the transport (tcp target, device) that every
  // later link shares, and owns it until the end, after every other link has gone.
  std::shared_ptr<cl::MemberLink> base;
  uint64_t next_generation = 1;
  // Set when the ClusterClient goes: no link is connected again, so async ops still failing
  // over end; `inflight` counts them until their callbacks have returned (cv: reached zero).
  bool closing = false;
  size_t inflight = 0;
  std::condition_variable idle;
  std::mutex connect_mu;  // one Connect at a time: a member comes up once, not per piece

  Member& slot(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu);
    auto& m = members[id];
    if (!m) m = std::make_unique<Member>();
    return *m;
  }

  // The link to member `id`, connected if need be; UNAVAILABLE naming the member when it is not
  // registered, passed over after a fault, or does not answer.
  absl::StatusOr<std::shared_ptr<cl::MemberLink>> Link(const std::string& id) {
    std::optional<cl::Membership::Member> entry = membership->member(id);
    if (!entry || !entry->present) {
      return absl::UnavailableError(absl::StrCat("member ", id, " is not registered in cluster ",
                                                 membership->source()));
    }
    Member& m = slot(id);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (closing) return absl::CancelledError("the ClusterClient is being closed");
      if (m.link && m.link->address() == entry->entry.address()) return m.link;
      if (m.passed_over_until > std::chrono::steady_clock::now()) {
        return absl::UnavailableError(absl::StrCat("member ", id, " is passed over after: ",
                                                   m.last_error));
      }
    }
    std::lock_guard<std::mutex> connecting(connect_mu);
    uint64_t generation;
    const gdrstore::Client* share = nullptr;  // base's, once there is one (connect_mu held)
    {
      std::lock_guard<std::mutex> lock(mu);
      if (m.link && m.link->address() == entry->entry.address()) return m.link;
      generation = next_generation++;
      if (base) share = &base->client();
    }
    absl::StatusOr<std::unique_ptr<cl::MemberLink>> made =
        cl::MemberLink::Connect(id, entry->entry.address(), options.client, generation, share);
    std::lock_guard<std::mutex> lock(mu);
    if (!made.ok()) {
      PassOverLocked(m, made.status());
      return made.status();
    }
    if (m.link) retired.push_back(std::move(m.link));
    m.link = std::move(*made);
    if (!base) base = m.link;
    return m.link;
  }

  // The link whose Client registers buffers: the base, connecting the first member that can
  // be when there is none yet. UNAVAILABLE naming each member tried when none can.
  absl::StatusOr<std::shared_ptr<cl::MemberLink>> Base() {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (base) return base;
    }
    std::vector<std::string> why;
    for (const auto& [id, m] : membership->members()) {
      if (!m.present) continue;
      absl::StatusOr<std::shared_ptr<cl::MemberLink>> link = Link(id);
      if (link.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        return base;  // this link, or one connected meanwhile
      }
      why.emplace_back(link.status().message());
    }
    return absl::UnavailableError(absl::StrCat(
        "no member of cluster ", membership->source(), " can be connected to register memory",
        why.empty() ? " (none is registered)" : absl::StrCat(": ", absl::StrJoin(why, "; "))));
  }

  // A piece on `link` failed with a member fault: pass the member over and let the next use
  // connect anew (a restarted daemon has none of this link's sessions).
  void Fault(const std::shared_ptr<cl::MemberLink>& link, const absl::Status& why) {
    Member& m = slot(link->id());
    m.errors.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu);
    PassOverLocked(m, why);
    if (m.link == link) retired.push_back(std::move(m.link));
  }

  // Under mu: `m` is not used again for member_retry; `why` says why meanwhile.
  void PassOverLocked(Member& m, const absl::Status& why) {
    m.last_error = std::string(why.message());
    m.passed_over_until = std::chrono::steady_clock::now() + options.member_retry;
  }
};

ClusterClient::ClusterClient(std::unique_ptr<State> state) : state_(std::move(state)) {}

bool ClusterClient::Owns(const Buffer& buffer) const {
  std::shared_ptr<cl::MemberLink> base;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    base = state_->base;
  }
  // Every link shares the base's transport and registrations: one registration serves them all.
  return base != nullptr && gdr::ClientAccess::Registered(base->client(), buffer);
}

std::string ClusterClient::PathOf(const Buffer& buffer) const {
  if (!Owns(buffer)) return "";
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->base->client().PathOf(buffer);
}

std::string ClusterClient::ConnectedTo() const { return "cluster " + source(); }

ClusterClient::~ClusterClient() {
  // Links (and their streams) end before the membership's watch, outside the lock: closing a
  // stream runs the callbacks of ops still on it, which count into the members' slots.
  // The base link goes last: the others reach memory through its transport.
  std::map<std::string, std::unique_ptr<State::Member>> members;
  std::vector<std::shared_ptr<cl::MemberLink>> retired;
  std::shared_ptr<cl::MemberLink> base;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->closing = true;
    members.swap(state_->members);
    retired.swap(state_->retired);
    base.swap(state_->base);
  }
  retired.clear();
  for (auto& [id, m] : members) m->link.reset();
  base.reset();
  // Ops on the closed links have been answered; one failing over finds no link (closing).
  // Their callbacks reach the state, which must stay until the last has returned.
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->idle.wait(lock, [this] { return state_->inflight == 0; });
}

absl::StatusOr<std::unique_ptr<ClusterClient>> ClusterClient::Open(const ClusterOptions& o) {
  auto state = std::make_unique<State>();
  state->options = o;
  absl::StatusOr<std::unique_ptr<cl::Membership>> m;
  if (!o.etcd_url.empty() && !o.members_file.empty()) {
    return absl::InvalidArgumentError("a cluster is opened by etcd URL or members file, not both");
  }
  GDR_RETURN_IF_ERROR(CheckEtcdTls(o));
  if (!o.etcd_url.empty()) {
    m = cl::Membership::OpenEtcd(o.etcd_url, {o.etcd_tls_ca, o.etcd_tls_cert, o.etcd_tls_key},
                                 absl::FromChrono(o.etcd_timeout));
  } else if (!o.members_file.empty()) {
    m = cl::Membership::OpenFile(o.members_file);
  } else {
    return absl::InvalidArgumentError("a cluster needs an etcd URL or a members file");
  }
  if (!m.ok()) return m.status();
  state->membership = std::move(*m);
  return std::unique_ptr<ClusterClient>(new ClusterClient(std::move(state)));
}

const std::string& ClusterClient::source() const { return state_->membership->source(); }

absl::StatusOr<Client*> ClusterClient::RegisteringClient() {
  GDR_ASSIGN_OR_RETURN(std::shared_ptr<cl::MemberLink> base, state_->Base());
  // The base stays until the ClusterClient goes (State::base).
  return &base->client();
}

absl::StatusOr<v1::ClusterVolume> ClusterClient::Layout(const std::string& volume) {
  return state_->membership->layout(volume);
}

std::vector<v1::ClusterVolume> ClusterClient::Volumes() { return state_->membership->volumes(); }

absl::StatusOr<std::vector<StoreVolume>> ClusterClient::ListVolumes() {
  std::vector<StoreVolume> out;
  for (const v1::ClusterVolume& v : Volumes()) {
    out.push_back(StoreVolume{v.name(), v.size(),
                              absl::StrCat("cluster: ", v.replicas(), " x ", v.stripe_unit(),
                                           " over ", v.members_size(), " members")});
  }
  std::sort(out.begin(), out.end(),
            [](const StoreVolume& a, const StoreVolume& b) { return a.name < b.name; });
  return out;
}

absl::Status ClusterClient::CreateVolume(const StoreVolumeSpec& spec) {
  constexpr uint64_t kDefaultStripeUnit = 1 << 20;
  return CreateVolume(spec.name, spec.stripe_unit == 0 ? kDefaultStripeUnit : spec.stripe_unit,
                      spec.replicas, spec.members,
                      MemberVolumes{spec.size, spec.file, spec.media})
      .status();
}

absl::Status ClusterClient::DeleteVolume(const std::string& name, bool delete_file) {
  return DeleteVolume(name, /*member_volumes=*/true, delete_file);
}

absl::StatusOr<v1::ClusterVolume> ClusterClient::CreateVolume(const std::string& name,
                                                              uint64_t stripe_unit,
                                                              uint32_t replicas,
                                                              std::vector<std::string> ids) {
  return CreateVolume(name, stripe_unit, replicas, std::move(ids), MemberVolumes{});
}

absl::StatusOr<v1::ClusterVolume> ClusterClient::CreateVolume(const std::string& name,
                                                              uint64_t stripe_unit,
                                                              uint32_t replicas,
                                                              std::vector<std::string> ids,
                                                              const MemberVolumes& make) {
  if (absl::Status st = state_->membership->Writable(); !st.ok()) return st;
  const auto members = state_->membership->members();
  if (ids.empty()) {
    for (const auto& [id, m] : members) {
      if (m.present) ids.push_back(id);
    }
    if (ids.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cluster ", source(), " has no member registered"));
    }
  }
  for (const std::string& id : ids) {
    auto it = members.find(id);
    if (it == members.end() || !it->second.present) {
      return absl::FailedPreconditionError(absl::StrCat("member ", id,
                                                        " is not registered in cluster ",
                                                        source()));
    }
  }
  v1::ClusterVolume l;
  l.set_name(name);
  l.set_stripe_unit(stripe_unit);
  for (const std::string& id : ids) l.add_members(id);
  l.set_replicas(replicas);
  l.set_epoch(1);
  l.set_created_unix_ms(absl::ToUnixMillis(absl::Now()));
  v1::ClusterVolume one_row = l;  // the layout's other fields checked before any size
  one_row.set_size(stripe_unit * ids.size());
  if (absl::Status st = cl::CheckLayout(one_row); !st.ok()) return st;

  uint64_t smallest = UINT64_MAX;
  // Volumes made on members now, undone when a later step fails: (id, file made now).
  std::vector<std::pair<std::string, bool>> made;
  auto undo = [&] {
    for (const auto& [id, file_made] : made) {
      if (absl::StatusOr<std::shared_ptr<cl::MemberLink>> link = state_->Link(id); link.ok()) {
        (*link)->client().DeleteVolume(name, file_made).IgnoreError();  // best effort
      }
    }
  };
  if (make.size > 0) {
    const uint64_t row = stripe_unit * ids.size();
    if (make.size > (uint64_t{1} << 47)) {
      return absl::InvalidArgumentError(
          absl::StrCat("size ", make.size, " is past 128 TiB"));
    }
    smallest = (make.size + row - 1) / row * stripe_unit * replicas;
    for (const std::string& id : ids) {
      absl::StatusOr<std::shared_ptr<cl::MemberLink>> link = state_->Link(id);
      absl::StatusOr<bool> file_made =
          link.ok() ? (*link)->client().CreateVolume(name, smallest, make.file, make.media)
                    : absl::StatusOr<bool>(link.status());
      if (!file_made.ok()) {
        undo();
        return absl::Status(file_made.status().code(),
                            absl::StrCat("member ", id, " did not make volume '", name, "' (",
                                         smallest, " bytes): ", file_made.status().message()));
      }
      made.emplace_back(id, *file_made);
    }
  } else {
    for (const std::string& id : ids) {
      bool found = false;
      for (const auto& v : members.at(id).entry.volumes()) {
        if (v.name() == name) {
          smallest = std::min<uint64_t>(smallest, v.size());
          found = true;
        }
      }
      if (!found) {
        return absl::FailedPreconditionError(absl::StrCat(
            "member ", id, " serves no volume '", name,
            "' (each member needs one of that name, or ask for them to be made)"));
      }
    }
  }
  l.set_size(cl::LogicalSize(stripe_unit, ids.size(), replicas, smallest));
  if (l.size() == 0) {
    undo();
    return absl::FailedPreconditionError(absl::StrCat(
        "the members' volumes '", name, "' (smallest ", smallest, " bytes) hold no whole row of ",
        replicas, " x ", stripe_unit, "-byte stripe units"));
  }
  if (absl::Status st = state_->membership->CreateLayout(l); !st.ok()) {
    undo();
    return st;
  }
  return l;
}

absl::Status ClusterClient::DeleteVolume(const std::string& name, bool member_volumes,
                                         bool delete_files) {
  absl::StatusOr<v1::ClusterVolume> l = state_->membership->layout(name);
  if (!l.ok()) return l.status();
  if (absl::Status st = state_->membership->DeleteLayout(name); !st.ok()) return st;
  if (!member_volumes) return absl::OkStatus();
  absl::Status first;
  for (const std::string& id : l->members()) {
    absl::StatusOr<std::shared_ptr<cl::MemberLink>> link = state_->Link(id);
    absl::Status st = link.ok() ? (*link)->client().DeleteVolume(name, delete_files)
                                : link.status();
    if (!st.ok() && first.ok()) {
      first = absl::Status(st.code(), absl::StrCat("member ", id, " did not delete volume '",
                                                   name, "': ", st.message()));
    }
  }
  return first;
}

std::vector<ClusterMemberStatus> ClusterClient::Members() {
  std::vector<ClusterMemberStatus> out;
  for (const auto& [id, m] : state_->membership->members()) {
    ClusterMemberStatus s;
    s.entry = m.entry;
    s.present = m.present;
    if (absl::StatusOr<absl::Duration> left = state_->membership->LeaseLeft(id); left.ok()) {
      s.lease_ttl_s = absl::ToInt64Seconds(*left);
    }
    absl::StatusOr<std::shared_ptr<cl::MemberLink>> link = state_->Link(id);
    absl::Status health = link.ok() ? (*link)->client().Ping() : link.status();
    s.healthy = health.ok();
    if (!health.ok()) s.error = std::string(health.message());
    State::Member& c = state_->slot(id);
    s.ops = c.ops.load();
    s.bytes = c.bytes.load();
    s.errors = c.errors.load();
    out.push_back(std::move(s));
  }
  return out;
}

// One op in flight: its pieces, those outstanding, the first error. Shared by the callbacks of
// its pieces; the last to answer runs `done` and lets the ClusterClient go (State::inflight).
struct ClusterClient::Op : std::enable_shared_from_this<Op> {
  explicit Op(State* s) : state(s) {}
  State* state;
  const Buffer* buffer = nullptr;
  v1::ClusterVolume layout;
  OpKind kind = OpKind::kWrite;
  bool put = false;
  std::string volume;
  size_t buffer_offset = 0;
  std::chrono::system_clock::time_point deadline;  // the whole op's (max(): none)
  OpOptions piece_options;                         // each piece's crc32c and sync
  OpResult result;                                 // bytes and path, when every piece is done
  std::vector<cl::Piece> work;                     // fixed once sending starts
  OpCallback done;
  std::mutex mu;
  size_t outstanding = 0;
  absl::Status first_error;

  void Done(const absl::Status& st) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!st.ok() && first_error.ok()) first_error = st;
      if (--outstanding != 0) return;
    }
    OpCallback cb = std::move(done);
    if (first_error.ok()) {
      cb(std::move(result));
    } else {
      cb(first_error);
    }
    std::lock_guard<std::mutex> lock(state->mu);
    if (--state->inflight == 0) state->idle.notify_all();
  }

  // A get's replica j has an even share of the time left among the replicas still to try,
  // so that failing over from a hung member still ends within the op's deadline.
  std::chrono::system_clock::time_point AttemptDeadline(const cl::Piece& p, size_t j) const {
    if (put || deadline == std::chrono::system_clock::time_point::max()) return deadline;
    const auto now = std::chrono::system_clock::now();
    if (deadline <= now) return deadline;
    return now + (deadline - now) / static_cast<int64_t>(p.replicas.size() - j);
  }

  // Sends replica `j` of piece `p`; a get whose replica fails for a member fault goes on to
  // the next replica (from the failed piece's callback).
  void Send(const cl::Piece& p, size_t j, absl::Status previous) {
    if (j >= p.replicas.size()) {
      Done(previous);
      return;
    }
    const std::string& id = layout.members(static_cast<int>(p.replicas[j].member));
    auto next = [self = shared_from_this(), &p, j](const absl::Status& why) {
      if (!self->put && MemberFault(why) && j + 1 < p.replicas.size()) {
        self->Send(p, j + 1, why);
      } else {
        self->Done(why);
      }
    };
    absl::StatusOr<std::shared_ptr<cl::MemberLink>> link = state->Link(id);
    if (!link.ok()) {
      next(link.status());
      return;
    }
    Extent e{volume, p.replicas[j].offset, p.length};
    // The answer holds the link weakly: the ClusterClient holds its links until the op is
    // answered, and closing a stream from inside its own answer would wait for itself.
    std::weak_ptr<cl::MemberLink> weak = *link;
    OpOptions o = piece_options;
    o.deadline = AttemptDeadline(p, j);
    State* s = state;
    (*link)->Submit(kind, e, *buffer, buffer_offset + p.op_offset, o,
                    [s, weak, id, next, bytes = p.length](absl::StatusOr<OpResult> r) {
                      State::Member& m = s->slot(id);
                      m.ops.fetch_add(1, std::memory_order_relaxed);
                      if (r.ok()) {
                        m.bytes.fetch_add(bytes, std::memory_order_relaxed);
                        next(absl::OkStatus());
                        return;
                      }
                      if (MemberFault(r.status())) {
                        if (std::shared_ptr<cl::MemberLink> l = weak.lock()) {
                          s->Fault(l, r.status());
                        }
                      }
                      next(r.status());
                    });
  }
};

void ClusterClient::SubmitAsync(OpKind kind, const Extent& extent, const Buffer& buffer,
                                size_t buffer_offset, OpCallback done,
                                const OpOptions& options) {
  const bool put = kind != OpKind::kWrite;
  OpOptions piece_options = options;
  piece_options.sync = options.sync || kind == OpKind::kReadSync;
  if (!put && options.sync) {
    done(absl::InvalidArgumentError("OpOptions::sync applies to puts only, not to a cluster get"));
    return;
  }
  if (!Owns(buffer)) {
    // Its registration is another transport's (a Client's, another cluster's), which alone
    // reaches it.
    done(absl::InvalidArgumentError(
        "the buffer was made by a Client or another ClusterClient: make it with this one"));
    return;
  }
  const uint64_t length = extent.length;
  if (buffer_offset > buffer.size() || length > buffer.size() - buffer_offset) {
    done(absl::InvalidArgumentError(absl::StrCat("[", buffer_offset, ", +", length,
                                                 ") is outside the buffer of ", buffer.size(),
                                                 " bytes")));
    return;
  }
  absl::StatusOr<v1::ClusterVolume> layout = Layout(extent.volume);
  if (!layout.ok()) {
    done(layout.status());
    return;
  }
  auto op = std::make_shared<Op>(state_.get());
  op->result.path = PathOf(buffer);
  if (length == 0) {
    done(std::move(op->result));
    return;
  }
  absl::StatusOr<std::vector<cl::Piece>> pieces = cl::Split(*layout, extent.offset, length);
  if (!pieces.ok()) {
    done(pieces.status());
    return;
  }
  // Links to every member the op may use are made here, on the caller's thread: a get that
  // goes on to another replica does so from a gRPC callback, which must not wait on a Connect.
  {
    std::set<uint32_t> involved;
    for (const cl::Piece& p : *pieces) {
      for (const cl::Placement& r : p.replicas) involved.insert(r.member);
    }
    for (uint32_t m : involved) (void)state_->Link(layout->members(static_cast<int>(m)));
  }
  // A put sends every replica of a piece, each answered alone (acknowledged when all have
  // it); a get sends replica 0 and goes on down the list only on a fault.
  if (put) {
    op->work.reserve(pieces->size() * layout->replicas());
    for (const cl::Piece& p : *pieces) {
      for (const cl::Placement& r : p.replicas) {
        cl::Piece one = p;
        one.replicas = {r};
        op->work.push_back(std::move(one));
      }
    }
  } else {
    op->work = std::move(*pieces);
  }
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->closing) {
      done(absl::CancelledError("the ClusterClient is being closed"));
      return;
    }
    ++state_->inflight;
  }
  op->buffer = &buffer;
  op->layout = *std::move(layout);
  op->kind = put ? OpKind::kRead : OpKind::kWrite;
  op->put = put;
  op->volume = extent.volume;
  op->buffer_offset = buffer_offset;
  // The op's deadline, failovers included (its own, else the client options' rpc_timeout).
  op->deadline = options.deadline ? *options.deadline
                                  : gdr::DeadlineAfter(state_->options.client.rpc_timeout);
  op->piece_options = piece_options;
  op->result.bytes = length;
  op->done = std::move(done);
  op->outstanding = op->work.size();
  for (const cl::Piece& p : op->work) op->Send(p, 0, absl::OkStatus());
}

}  // namespace gdrstore
