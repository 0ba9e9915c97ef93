#include "client/src/cluster/membership.h"

#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/src/cluster/layout.h"
#include "common/etcd/etcd_url.h"
#include "common/base/log.h"

namespace gdr::cluster {

namespace v1 = gdrstore::v1;

absl::StatusOr<std::unique_ptr<Membership>> Membership::OpenEtcd(const std::string& url,
                                                                 const etcd::EtcdTls& tls,
                                                                 absl::Duration call_timeout) {
  absl::StatusOr<etcd::EtcdUrl> parsed = etcd::ParseEtcdUrl(url);
  if (!parsed.ok()) return parsed.status();
  etcd::EtcdClient::Options o;
  o.endpoints = parsed->endpoints;
  o.call_timeout = call_timeout;
  o.tls = tls;
  absl::StatusOr<std::unique_ptr<etcd::EtcdClient>> client = etcd::EtcdClient::Create(o);
  if (!client.ok()) return client.status();
  std::unique_ptr<Membership> m(new Membership());
  m->source_ = url;
  m->prefix_ = parsed->prefix;
  m->etcd_ = std::move(*client);
  if (absl::Status st = m->Load(); !st.ok()) return st;
  return m;
}

absl::Status Membership::Load() {
  int64_t revision = 0;
  absl::StatusOr<std::vector<etcd::KeyValue>> kvs = etcd_->GetPrefix(prefix_ + "/", &revision);
  if (!kvs.ok()) {
    return absl::Status(kvs.status().code(), absl::StrCat("reading the cluster at ", source_,
                                                          ": ", kvs.status().message()));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const etcd::KeyValue& kv : *kvs) Apply(etcd::WatchEvent{etcd::WatchEvent::kPut, kv});
  }
  watch_ = etcd_->WatchPrefix(
      prefix_ + "/", revision,
      [this](const etcd::WatchEvent& e) {
        std::lock_guard<std::mutex> lock(mu_);
        Apply(e);
      },
      [this](const absl::Status& st) {
        if (st.ok()) {
          GDR_LOG(kInfo) << "cluster " << source_ << ": following etcd again";
        } else if (absl::IsDataLoss(st)) {
          // Changes were compacted away: read the whole prefix again.
          int64_t rev = 0;
          auto again = etcd_->GetPrefix(prefix_ + "/", &rev);
          if (!again.ok()) return;
          std::lock_guard<std::mutex> lock(mu_);
          members_.clear();
          layouts_.clear();
          for (const etcd::KeyValue& kv : *again) {
            Apply(etcd::WatchEvent{etcd::WatchEvent::kPut, kv});
          }
        } else {
          GDR_LOG(kWarning) << "cluster " << source_ << ": lost the etcd watch (" << st.message()
                            << "); keeping the last view and re-establishing it";
        }
      });
  return absl::OkStatus();
}

void Membership::Apply(const etcd::WatchEvent& e) {
  const std::string& key = e.kv.key;
  if (absl::StartsWith(key, members_prefix())) {
    const std::string id = key.substr(members_prefix().size());
    if (e.kind == etcd::WatchEvent::kDelete) {
      auto it = members_.find(id);
      if (it != members_.end()) it->second.present = false;
      return;
    }
    absl::StatusOr<v1::ClusterMember> m = ParseMember(key, e.kv.value);
    if (!m.ok()) {
      GDR_LOG(kWarning) << "cluster " << source_ << ": " << m.status().message()
                        << "; member left out";
      return;
    }
    Member& slot = members_[id];
    slot.entry = std::move(*m);
    slot.present = true;
    slot.lease = e.kv.lease;
  } else if (absl::StartsWith(key, volumes_prefix())) {
    const std::string name = key.substr(volumes_prefix().size());
    if (e.kind == etcd::WatchEvent::kDelete) {
      layouts_.erase(name);
      return;
    }
    layouts_.insert_or_assign(name, ParseLayout(key, e.kv.value));
  }
}

absl::StatusOr<std::unique_ptr<Membership>> Membership::OpenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cluster members file ", path, " cannot be read"));
  }
  std::stringstream text;
  text << in.rdbuf();
  v1::ClusterFile file;
  {
    google::protobuf::util::JsonParseOptions o;
    auto st = google::protobuf::util::JsonStringToMessage(text.str(), &file, o);
    if (!st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cluster members file ", path,
                                                     " is malformed: ",
                                                     std::string(st.message())));
    }
  }
  std::unique_ptr<Membership> m(new Membership());
  m->source_ = path;
  for (const v1::ClusterMember& e : file.members()) {
    const std::string key = absl::StrCat(path, ": members/", e.id());
    if (absl::Status st = CheckMemberEntry(key, e); !st.ok()) return st;
    if (m->members_.count(e.id())) {
      return absl::InvalidArgumentError(absl::StrCat("cluster members file ", path,
                                                     ": member '", e.id(), "' is listed twice"));
    }
    m->members_[e.id()] = Member{e, true, 0};
  }
  for (const v1::ClusterVolume& l : file.volumes()) {
    const std::string key = absl::StrCat(path, ": volumes/", l.name());
    if (absl::Status st = CheckLayoutEntry(key, l); !st.ok()) return st;
    for (const std::string& id : l.members()) {
      if (!m->members_.count(id)) {
        return absl::InvalidArgumentError(absl::StrCat(key, " names member '", id,
                                                       "', which the file does not list"));
      }
    }
    m->layouts_.insert_or_assign(l.name(), l);
  }
  return m;
}

Membership::~Membership() { watch_.reset(); }

std::map<std::string, Membership::Member> Membership::members() const {
  std::lock_guard<std::mutex> lock(mu_);
  return members_;
}

std::optional<Membership::Member> Membership::member(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = members_.find(id);
  if (it == members_.end()) return std::nullopt;
  return it->second;
}

absl::StatusOr<v1::ClusterVolume> Membership::layout(const std::string& volume) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = layouts_.find(volume);
  if (it == layouts_.end()) {
    return absl::NotFoundError(absl::StrCat("cluster ", source_, " has no volume '", volume,
                                            "' (gdrctl cluster create-volume makes one)"));
  }
  return it->second;
}

std::vector<v1::ClusterVolume> Membership::volumes() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::ClusterVolume> out;
  for (const auto& [name, l] : layouts_) {
    if (l.ok()) out.push_back(*l);
  }
  return out;
}

absl::Status Membership::Writable() const {
  if (etcd_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "cluster ", source_, " is a static members file: add the volume to the file"));
}

absl::Status Membership::CreateLayout(const v1::ClusterVolume& layout) {
  if (absl::Status st = Writable(); !st.ok()) return st;
  if (absl::Status st = CheckLayout(layout); !st.ok()) return st;
  const std::string key = volumes_prefix() + layout.name();
  absl::StatusOr<bool> put = etcd_->PutIfAbsent(key, ToJson(layout));
  if (!put.ok()) return put.status();
  if (!*put) {
    return absl::AlreadyExistsError(absl::StrCat("cluster volume '", layout.name(),
                                                 "' exists already (", key, ")"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  layouts_.insert_or_assign(layout.name(), layout);  // the watch brings the same soon
  return absl::OkStatus();
}

absl::Status Membership::DeleteLayout(const std::string& volume) {
  if (absl::Status st = Writable(); !st.ok()) return st;
  absl::StatusOr<gdrstore::v1::ClusterVolume> had = layout(volume);
  if (!had.ok() && absl::IsNotFound(had.status())) return had.status();
  if (absl::Status st = etcd_->Delete(volumes_prefix() + volume); !st.ok()) return st;
  std::lock_guard<std::mutex> lock(mu_);
  layouts_.erase(volume);  // the watch brings the same soon
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> Membership::LeaseLeft(const std::string& id) const {
  std::optional<Member> m = member(id);
  if (!etcd_ || !m || m->lease == 0) {
    return absl::NotFoundError(absl::StrCat("member ", id, " has no lease"));
  }
  return etcd_->TimeToLive(m->lease);
}

}  // namespace gdr::cluster
