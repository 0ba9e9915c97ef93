#include "agent/client_table.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_status.h"

namespace gdr::agent {

namespace v1 = gdrstore::v1;

std::string DescribeClient(const handoff::SessionInfo& info) {
  return absl::StrCat("uid ", info.peer.uid, " pid ", info.peer.pid,
                      info.name.empty() ? "" : absl::StrCat(" (", info.name, ")"));
}

void OpCounts::Fill(v1::OpCounters* out) const {
  out->set_write_ops(write_ops);
  out->set_write_bytes(write_bytes);
  out->set_read_ops(read_ops);
  out->set_read_bytes(read_bytes);
  out->set_inflight_ops(inflight_ops);
  out->set_inflight_bytes(inflight_bytes);
  for (const auto& [code, count] : errors) {
    v1::ErrorCount* e = out->add_errors();
    e->set_code(code);
    e->set_name(absl::StatusCodeToString(static_cast<absl::StatusCode>(code)));
    e->set_count(count);
  }
}

namespace {

void CountEnd(OpCounts& c, bool write, uint64_t bytes, absl::StatusCode code) {
  c.inflight_ops -= 1;
  c.inflight_bytes -= static_cast<int64_t>(bytes);
  if (code != absl::StatusCode::kOk) {
    ++c.errors[static_cast<int>(code)];
  } else if (write) {
    ++c.write_ops;
    c.write_bytes += bytes;
  } else {
    ++c.read_ops;
    c.read_bytes += bytes;
  }
}

}  // namespace

std::shared_ptr<Session> ClientTable::Find(uint64_t session) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  return it == sessions_.end() ? nullptr : it->second;
}

void ClientTable::Add(const handoff::SessionInfo& info,
                       std::shared_ptr<handoff::ImportedRegion> region,
                       std::unique_ptr<UpstreamMemory> memory) {
  std::shared_ptr<Session> s;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Session>& slot = sessions_[info.id];
    if (slot == nullptr) slot = std::make_shared<Session>(info);
    s = slot;
  }
  const uint32_t rkey = region->rkey();
  const uint64_t size = region->size();
  auto mapped = std::make_shared<MappedRegion>();
  mapped->region = std::move(region);
  mapped->memory = std::move(memory);
  std::shared_ptr<const MappedRegion> old;  // destroyed outside the lock
  absl::MutexLock lock(&s->mu);
  std::shared_ptr<const MappedRegion>& entry = s->regions[rkey];
  if (entry != nullptr) s->registered_bytes -= entry->region->size();
  old = std::exchange(entry, std::move(mapped));
  s->registered_bytes += size;
}

void ClientTable::End(uint64_t session) {
  std::shared_ptr<Session> s;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session);
    if (it == sessions_.end()) return;
    s = std::move(it->second);
    sessions_.erase(it);
  }
  std::map<uint32_t, std::shared_ptr<const MappedRegion>> gone;
  {
    absl::MutexLock lock(&s->mu);
    gone.swap(s->regions);
    s->registered_bytes = 0;
    s->ended = true;
  }
  // `gone` goes here: each region whose ops are done is withdrawn and unmapped now, the others
  // when their last op ends.
}

void ClientTable::Sweep() {
  std::vector<std::shared_ptr<Session>> all;
  {
    absl::MutexLock lock(&mu_);
    all.reserve(sessions_.size());
    for (const auto& [id, s] : sessions_) all.push_back(s);
  }
  std::vector<std::shared_ptr<const MappedRegion>> gone;
  for (const std::shared_ptr<Session>& s : all) {
    absl::MutexLock lock(&s->mu);
    for (auto it = s->regions.begin(); it != s->regions.end();) {
      // The handoff server's table holds every region it has not let go, and an op resolving
      // one holds it for a moment: a count of one means deregistered, and nothing can find it
      // again.
      if (it->second->region.use_count() == 1) {
        s->registered_bytes -= it->second->region->size();
        gone.push_back(std::move(it->second));
        it = s->regions.erase(it);
      } else {
        ++it;
      }
    }
  }
}

absl::StatusOr<AdmittedOp> ClientTable::Begin(
    uint64_t session, const std::shared_ptr<const handoff::ImportedRegion>& region, bool write,
    uint64_t bytes) {
  std::shared_ptr<Session> s = Find(session);
  if (s == nullptr) {
    return absl::UnavailableError(absl::StrCat("session ", session, " has ended"));
  }
  AdmittedOp op;
  {
    absl::MutexLock lock(&s->mu);
    if (s->ended) return absl::UnavailableError(absl::StrCat("session ", session, " has ended"));
    auto it = s->regions.find(region->rkey());
    if (it == s->regions.end() || it->second->region.get() != region.get()) {
      return absl::InternalError(absl::StrCat("region rkey ", region->rkey(), " of ",
                                              DescribeClient(s->info),
                                              " has no upstream registration"));
    }
    op.mapped = it->second;
  }
  uint32_t now = s->inflight.load(std::memory_order_relaxed);
  do {
    if (now >= max_ops_) {
      return NotAdmittedError(absl::StrCat(
          DescribeClient(s->info), " has ", now, " ops in flight, the agent's limit "
          "(--max-ops-per-client=", max_ops_, "); not started, send it again after an answer"));
    }
  } while (!s->inflight.compare_exchange_weak(now, now + 1, std::memory_order_relaxed));
  op.session = std::move(s);
  op.write = write;
  op.bytes = bytes;
  inflight_.fetch_add(1, std::memory_order_relaxed);
  {
    absl::MutexLock lock(&op.session->mu);
    op.session->counts.inflight_ops += 1;
    op.session->counts.inflight_bytes += static_cast<int64_t>(bytes);
  }
  absl::MutexLock lock(&total_mu_);
  total_.inflight_ops += 1;
  total_.inflight_bytes += static_cast<int64_t>(bytes);
  return op;
}

void ClientTable::Finish(const AdmittedOp& op, const absl::Status& status) {
  {
    absl::MutexLock lock(&op.session->mu);
    CountEnd(op.session->counts, op.write, op.bytes, status.code());
  }
  op.session->inflight.fetch_sub(1, std::memory_order_relaxed);
  inflight_.fetch_sub(1, std::memory_order_relaxed);
  absl::MutexLock lock(&total_mu_);
  CountEnd(total_, op.write, op.bytes, status.code());
}

void ClientTable::CountRefused(absl::StatusCode code) {
  absl::MutexLock lock(&total_mu_);
  ++total_.errors[static_cast<int>(code)];
}

void ClientTable::Fill(v1::GetStatsResponse* out, v1::AgentStats* agent,
                        std::optional<uid_t> viewer, bool see_all, uint64_t after,
                        uint32_t max_entries) const {
  {
    absl::MutexLock lock(&total_mu_);
    total_.Fill(out->mutable_total());
    v1::TransportStats* t = out->add_transports();
    t->set_transport(v1::TRANSPORT_LOCAL);
    total_.Fill(t->mutable_ops());
    t->mutable_pool()->set_inflight_ops(static_cast<uint64_t>(std::max<int64_t>(0, inflight())));
  }
  // The page's sessions (in session order, after `after`), picked under the lock.
  std::vector<std::shared_ptr<Session>> page;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = sessions_.upper_bound(after); it != sessions_.end(); ++it) {
      const Session& s = *it->second;
      if (!see_all && (!viewer || s.info.peer.uid != *viewer)) continue;
      if (max_entries != 0 && page.size() == max_entries) {
        out->set_next_page_after(absl::StrCat(page.back()->info.id));
        break;
      }
      page.push_back(it->second);
    }
  }
  for (const std::shared_ptr<Session>& s : page) {
    v1::AgentSession* e = agent->add_clients();
    e->set_session(s->info.id);
    e->set_uid(s->info.peer.uid);
    e->set_gid(s->info.peer.gid);
    e->set_pid(static_cast<uint32_t>(s->info.peer.pid));
    e->set_name(s->info.name);
    v1::ClientStats* c = out->add_clients();
    c->set_client(DescribeClient(s->info));
    absl::MutexLock lock(&s->mu);
    e->set_regions(s->regions.size());
    e->set_registered_bytes(s->registered_bytes);
    s->counts.Fill(e->mutable_ops());
    s->counts.Fill(c->mutable_ops());
  }
}

}  // namespace gdr::agent
