#include "daemon/ops/cluster_member.h"

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/etcd/etcd_url.h"
#include "common/base/host_port.h"
#include "common/base/log.h"
#include "common/base/thread_name.h"

namespace gdr {

namespace {

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

// The entry as etcd holds it: protobuf's JSON with the proto's field names.
std::string EntryJson(const gdrstore::v1::ClusterMember& entry) {
  google::protobuf::util::JsonPrintOptions p;
  p.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(entry, &out, p);
  return out;
}

}  // namespace

std::string DefaultMemberId(int port) { return absl::StrCat(HostName(), "-", port); }

absl::StatusOr<std::string> AdvertiseAddress(const std::string& advertise,
                                             const std::string& listen, int port) {
  if (!advertise.empty()) return advertise;
  if (absl::StartsWith(listen, "unix:")) {
    return absl::InvalidArgumentError(
        "--cluster with a unix-socket --listen needs --cluster-advertise HOST:PORT");
  }
  // The listen port may be 0 (ephemeral): only its host is taken.
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--listen '", listen, "' has no port"));
  }
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host == "0.0.0.0" || host == "::") host = HostName();
  return JoinHostPort(host, static_cast<uint16_t>(port));
}

absl::StatusOr<std::unique_ptr<ClusterMember>> ClusterMember::Start(
    const std::string& url, const etcd::EtcdTls& tls, absl::Duration ttl,
    gdrstore::v1::ClusterMember entry) {
  absl::StatusOr<etcd::EtcdUrl> parsed = etcd::ParseEtcdUrl(url);
  if (!parsed.ok()) return parsed.status();
  etcd::EtcdClient::Options o;
  o.endpoints = parsed->endpoints;
  // Short calls: a keepalive must not take a whole TTL to find etcd away.
  o.call_timeout = std::min(absl::Seconds(2), ttl / 4);
  o.tls = tls;
  absl::StatusOr<std::unique_ptr<etcd::EtcdClient>> client = etcd::EtcdClient::Create(o);
  if (!client.ok()) return client.status();
  std::unique_ptr<ClusterMember> m(new ClusterMember());
  m->etcd_ = std::move(*client);
  m->url_ = url;
  m->ttl_ = ttl;
  m->id_ = entry.id();
  m->key_ = absl::StrCat(parsed->prefix, "/members/", entry.id());
  {
    absl::MutexLock lock(&m->mu_);
    m->value_ = EntryJson(entry);
  }
  m->thread_ = std::thread([raw = m.get()] { raw->Run(); });
  return m;
}

ClusterMember::~ClusterMember() { Stop(); }

void ClusterMember::Update(const gdrstore::v1::ClusterMember& entry) {
  if (entry.id() != id_) {
    GDR_LOG(kError) << "cluster " << url_ << ": an entry for member '" << entry.id()
                    << "' cannot replace " << key_ << "; kept as it was";
    return;
  }
  std::string value = EntryJson(entry);
  absl::MutexLock lock(&mu_);
  if (value == value_) return;
  value_ = std::move(value);
  changed_ = true;
}

bool ClusterMember::RegisterOnce(const std::string& value) {
  absl::StatusOr<int64_t> lease = etcd_->GrantLease(ttl_);
  absl::Status st = lease.status();
  if (lease.ok()) st = etcd_->Put(key_, value, *lease);
  absl::MutexLock lock(&mu_);
  if (!st.ok()) {
    if (status_.last_error != st.message()) {
      GDR_LOG(kWarning) << "cluster " << url_ << ": cannot register " << key_ << " ("
                        << st.message() << "); serving on and trying again every second";
    }
    status_.last_error = std::string(st.message());
    // A lease granted but not used expires by itself.
    return false;
  }
  GDR_LOG(kInfo) << "cluster " << url_ << ": registered as " << key_ << " (lease " << *lease
                 << ", ttl " << absl::FormatDuration(ttl_) << ")";
  status_ = Status{true, *lease, ""};
  return true;
}

absl::Status ClusterMember::PutOnce(const std::string& value, int64_t lease) {
  absl::Status st = etcd_->Put(key_, value, lease);
  absl::MutexLock lock(&mu_);
  if (st.ok()) {
    GDR_LOG(kInfo) << "cluster " << url_ << ": " << key_ << " rewritten (lease " << lease << ")";
    status_.last_error.clear();
  } else if (!absl::IsNotFound(st) && status_.last_error != st.message()) {
    GDR_LOG(kWarning) << "cluster " << url_ << ": cannot rewrite " << key_ << " ("
                      << st.message() << "); serving on, trying every second";
  }
  if (!st.ok()) status_.last_error = std::string(st.message());
  return st;
}

void ClusterMember::Run() {
  SetThreadName("gdr-cluster");
  // When the lease is next renewed (or, unregistered, registering next tried), and when a
  // changed entry is next written; each etcd call is bounded by the client's call deadline.
  absl::Time renew_at = absl::InfinitePast();
  absl::Time write_at = absl::InfiniteFuture();
  for (;;) {
    int64_t lease;
    std::string value;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithDeadline(absl::Condition(this, &ClusterMember::Woken),
                            std::min(renew_at, write_at));
      if (stopping_) return;
      if (changed_) write_at = absl::InfinitePast();
      changed_ = false;
      lease = status_.registered ? status_.lease : 0;
      value = value_;  // the newest entry: what any write below puts
    }
    const absl::Time now = absl::Now();
    if (lease == 0) {
      if (now < renew_at && now < write_at) continue;
      const bool registered = RegisterOnce(value);
      renew_at = now + (registered ? ttl_ / 3 : absl::Seconds(1));
      write_at = absl::InfiniteFuture();  // a new registration carries the newest entry
      continue;
    }
    if (now >= write_at) {
      const absl::Status st = PutOnce(value, lease);
      write_at = st.ok() ? absl::InfiniteFuture() : now + absl::Seconds(1);
      if (absl::IsNotFound(st)) renew_at = now;  // the lease is gone: the keepalive says so
    }
    if (now < renew_at) continue;
    absl::StatusOr<absl::Duration> left = etcd_->KeepAliveOnce(lease);
    if (left.ok()) {
      absl::MutexLock lock(&mu_);
      if (!status_.last_error.empty()) {
        GDR_LOG(kInfo) << "cluster " << url_ << ": etcd answers again; " << key_ << " kept";
      }
      status_.last_error.clear();
      renew_at = now + ttl_ / 3;
      continue;
    }
    absl::MutexLock lock(&mu_);
    if (absl::IsNotFound(left.status())) {
      // Expired while etcd was away (or revoked by someone): register anew at once.
      GDR_LOG(kWarning) << "cluster " << url_ << ": lease " << lease << " of " << key_
                        << " is gone; registering again";
      status_.registered = false;
      status_.lease = 0;
      renew_at = absl::InfinitePast();
    } else {
      if (status_.last_error != left.status().message()) {
        GDR_LOG(kWarning) << "cluster " << url_ << ": keepalive failed ("
                          << left.status().message() << "); serving on, trying every second";
      }
      status_.last_error = std::string(left.status().message());
      renew_at = now + absl::Seconds(1);
    }
  }
}

void ClusterMember::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    lease = status_.registered ? status_.lease : 0;
    status_.registered = false;
  }
  if (lease == 0) return;
  absl::Status st = etcd_->RevokeLease(lease);
  if (st.ok() || absl::IsNotFound(st)) {
    GDR_LOG(kInfo) << "cluster " << url_ << ": left (" << key_ << " removed)";
  } else {
    GDR_LOG(kWarning) << "cluster " << url_ << ": could not revoke lease " << lease << " ("
                      << st.message() << "); " << key_ << " goes when it expires";
  }
}

ClusterMember::Status ClusterMember::status() const {
  absl::MutexLock lock(&mu_);
  return status_;
}

}  // namespace gdr
