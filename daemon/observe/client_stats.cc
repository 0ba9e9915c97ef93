#include "daemon/observe/client_stats.h"

#include "common/grpc/grpc_peer.h"

namespace gdr {

namespace v1 = gdrstore::v1;

std::string ClientIdentity(absl::string_view label, absl::string_view peer) {
  if (!label.empty()) return std::string(label);
  absl::StatusOr<GrpcPeer> p = ParseGrpcPeer(peer);
  if (!p.ok()) return "unknown";
  switch (p->kind) {
    case GrpcPeer::Kind::kIp:
      return p->ip.ToString();
    case GrpcPeer::Kind::kUnix:
      return "unix";
  }
  return "unknown";
}

OpCounters* ClientStats::Resolve(absl::string_view identity) {
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = clients_.find(identity);
    if (it != clients_.end()) return it->second.get();
    if (clients_.size() >= kMaxClients) {
      other_used_.store(true, std::memory_order_relaxed);
      return &other_;
    }
  }
  absl::MutexLock lock(&mu_);
  auto it = clients_.find(identity);
  if (it != clients_.end()) return it->second.get();
  if (clients_.size() >= kMaxClients) {
    other_used_.store(true, std::memory_order_relaxed);
    return &other_;
  }
  return clients_.emplace(std::string(identity), std::make_unique<OpCounters>())
      .first->second.get();
}

void ClientStats::Fill(google::protobuf::RepeatedPtrField<v1::ClientStats>* out) const {
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [name, c] : clients_) {
      v1::ClientStats* e = out->Add();
      e->set_client(name);
      c->Fill(e->mutable_ops());
    }
  }
  if (other_used_.load(std::memory_order_relaxed)) {
    v1::ClientStats* e = out->Add();
    e->set_client(std::string(kOther));
    other_.Fill(e->mutable_ops());
  }
}

}  // namespace gdr
