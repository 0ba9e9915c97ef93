// The cluster part of the C ABI (gdrstore/gdrstore.h, gdrstore_cluster_*) over the C++
// ClusterClient: opening one, its layouts and status. A cluster handle is a store handle
// (c_api_store.h): buffers, ops, streams and polls are the client calls', which take either.
#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/src/c_api_handle.h"
#include "client/src/c_api_store.h"
#include "client/src/cluster/status_json.h"
#include "gdrstore/cluster.h"
#include "gdrstore/gdrstore.h"

namespace {

using gdr::capi::AsC;
using gdr::capi::Guard;
using gdr::capi::Invalid;
using gdr::capi::Kind;
using gdr::capi::Self;

struct ClusterHandle : gdr::capi::StoreHandle {
  static constexpr Kind kKind = Kind::kCluster;
  ClusterHandle() : StoreHandle(kKind) {}
  gdrstore::Store& store() const override { return *cluster; }
  std::unique_ptr<gdrstore::ClusterClient> cluster;
};

// A gdrstore_cluster_buffer is a gdrstore_buffer made by a cluster: the old calls forward.
gdrstore_buffer* AsBuffer(const gdrstore_cluster_buffer* b) {
  return AsC<gdrstore_buffer>(gdr::capi::IdOf(b));
}

// The cluster handle as a store handle, once it is known to be a cluster's (the old calls keep
// refusing a client handle); nullptr with the reason recorded otherwise.
gdrstore_client* AsStore(gdrstore_cluster* c) {
  if (Self<ClusterHandle>(c) == nullptr) return nullptr;
  return AsC<gdrstore_client>(gdr::capi::IdOf(c));
}

// "m0, m1,m2" -> {"m0", "m1", "m2"}; NULL or "" -> {} (every member present).
absl::StatusOr<std::vector<std::string>> ParseMembers(const char* list) {
  std::vector<std::string> ids;
  if (list == nullptr || absl::StripAsciiWhitespace(list).empty()) return ids;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("members list '", list, "' has an empty entry (want ID,ID,...)"));
    }
    ids.emplace_back(part);
  }
  return ids;
}

// The create and make entry points: the layout written (after the members' volumes are made
// when `make.size` is set), handed back as JSON when asked for.
gdrstore_status CreateLayout(ClusterHandle& c, const char* name, uint64_t stripe_unit,
                             uint32_t replicas, const char* members,
                             const gdrstore::ClusterClient::MemberVolumes& make,
                             char** layout_json) {
  if (name == nullptr || name[0] == '\0') return Invalid(c, "a volume name is required");
  return Guard(c, [&] {
    absl::StatusOr<std::vector<std::string>> ids = ParseMembers(members);
    if (!ids.ok()) return c.Fail(ids.status());
    absl::StatusOr<gdrstore::v1::ClusterVolume> layout =
        c.cluster->CreateVolume(name, stripe_unit, replicas, *std::move(ids), make);
    if (!layout.ok()) return c.Fail(layout.status());
    if (layout_json == nullptr) return GDRSTORE_OK;
    absl::StatusOr<std::string> text = gdr::capi::ToJson(*layout);
    if (!text.ok()) return c.Fail(text.status());
    return gdr::capi::MallocString(c, *text, layout_json);
  });
}

}  // namespace

extern "C" {

void gdrstore_cluster_options_init(gdrstore_cluster_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
}

gdrstore_status gdrstore_cluster_open(const gdrstore_cluster_options* o, gdrstore_cluster** cluster,
                                      char* error, size_t error_len) {
  auto fail = [&](const absl::Status& s) {
    gdr::capi::CopyMessage(s, error, error_len);
    return static_cast<gdrstore_status>(s.code());
  };
  if (cluster == nullptr) {
    return fail(absl::InvalidArgumentError("cluster (the out pointer) is NULL"));
  }
  *cluster = nullptr;
  constexpr size_t kFirstOptionsSize =
      offsetof(gdrstore_cluster_options, etcd_timeout_ms) + sizeof(uint32_t);
  if (o == nullptr || o->struct_size < kFirstOptionsSize) {
    return fail(absl::InvalidArgumentError(
        "options missing or from an older header (call gdrstore_cluster_options_init)"));
  }
  try {
    gdrstore::ClusterOptions opts;
    if (o->etcd_url != nullptr) opts.etcd_url = o->etcd_url;
    if (o->members_file != nullptr) opts.members_file = o->members_file;
    gdrstore_client_options defaults;
    gdrstore_client_options_init(&defaults);
    absl::StatusOr<gdrstore::ClientOptions> client =
        gdr::capi::ClientOptionsFromC(o->client != nullptr ? o->client : &defaults,
                                      gdr::capi::EnvironmentUse::kClusterMember);
    if (!client.ok()) return fail(client.status());
    opts.client = *std::move(client);
    if (o->member_retry_ms != 0) {
      opts.member_retry = std::chrono::milliseconds(o->member_retry_ms);
    }
    if (o->etcd_timeout_ms != 0) {
      opts.etcd_timeout = std::chrono::milliseconds(o->etcd_timeout_ms);
    }
    // Fields a caller's header may predate: read only where its struct_size reaches.
    auto covers = [&](size_t offset) { return o->struct_size >= offset + sizeof(const char*); };
    auto text = [](const char* p) { return p != nullptr ? std::string(p) : std::string(); };
    using Options = gdrstore_cluster_options;
    if (covers(offsetof(Options, etcd_tls_ca))) opts.etcd_tls_ca = text(o->etcd_tls_ca);
    if (covers(offsetof(Options, etcd_tls_cert))) opts.etcd_tls_cert = text(o->etcd_tls_cert);
    if (covers(offsetof(Options, etcd_tls_key))) opts.etcd_tls_key = text(o->etcd_tls_key);
    absl::StatusOr<std::unique_ptr<gdrstore::ClusterClient>> c =
        gdrstore::ClusterClient::Open(opts);
    if (!c.ok()) return fail(c.status());
    auto h = std::make_shared<ClusterHandle>();
    h->cluster = std::move(*c);
    std::shared_ptr<gdr::capi::StoreLife> life = h->life;
    const gdr::capi::HandleId id = gdr::capi::Register(std::move(h));
    life->id.store(id);
    *cluster = AsC<gdrstore_cluster>(id);
    return GDRSTORE_OK;
  } catch (const std::exception& e) {
    return fail(absl::InternalError(absl::StrCat("unexpected C++ exception: ", e.what())));
  }
}

void gdrstore_cluster_close(gdrstore_cluster* cluster) {
  std::shared_ptr<ClusterHandle> c = gdr::capi::Unregister<ClusterHandle>(cluster);
  if (c == nullptr) return;
  // As a client's close: its streams' ops answered, and no new one taken. The cluster goes
  // with the last reference: here, unless another thread is inside a call or a stream of it is
  // still open. Its buffers stay (their memory too) until released.
  gdr::capi::EndStreams(*c->life);
}

// The buffer and op calls of a cluster are gdrstore.h's store calls on a cluster handle.

gdrstore_status gdrstore_cluster_alloc_host(gdrstore_cluster* cluster, size_t n,
                                            gdrstore_cluster_buffer** out) {
  gdrstore_client* store = AsStore(cluster);
  if (store == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return gdrstore_alloc_host(store, n, reinterpret_cast<gdrstore_buffer**>(out));
}

gdrstore_status gdrstore_cluster_register_host(gdrstore_cluster* cluster, void* p, size_t n,
                                               gdrstore_cluster_buffer** out) {
  gdrstore_client* store = AsStore(cluster);
  if (store == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return gdrstore_register_host(store, p, n, reinterpret_cast<gdrstore_buffer**>(out));
}

gdrstore_status gdrstore_cluster_register_gpu(gdrstore_cluster* cluster, uint64_t device_ptr,
                                              size_t n, gdrstore_cluster_buffer** out) {
  gdrstore_client* store = AsStore(cluster);
  if (store == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return gdrstore_register_gpu(store, device_ptr, n,
                               reinterpret_cast<gdrstore_buffer**>(out));
}

void gdrstore_cluster_buffer_release(gdrstore_cluster_buffer* buffer) {
  gdrstore_buffer_release(AsBuffer(buffer));
}

void* gdrstore_cluster_buffer_data(const gdrstore_cluster_buffer* buffer) {
  gdrstore_buffer_info info;
  gdrstore_buffer_get_info(AsBuffer(buffer), &info);
  // Device memory: its device pointer, as a cluster buffer always gave.
  return info.gpu_ordinal >= 0 ? reinterpret_cast<void*>(info.address) : info.host;
}

size_t gdrstore_cluster_buffer_size(const gdrstore_cluster_buffer* buffer) {
  gdrstore_buffer_info info;
  gdrstore_buffer_get_info(AsBuffer(buffer), &info);
  return info.size;
}

gdrstore_status gdrstore_cluster_put(gdrstore_cluster* c, const char* volume, uint64_t offset,
                                     uint64_t n, gdrstore_cluster_buffer* buffer,
                                     size_t buffer_offset) {
  if (AsStore(c) == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return gdr::capi::StoreOp(c, gdrstore::OpKind::kRead, volume, offset, n, buffer,
                            "cluster buffer", buffer_offset, nullptr);
}

gdrstore_status gdrstore_cluster_get(gdrstore_cluster* c, const char* volume, uint64_t offset,
                                     uint64_t n, gdrstore_cluster_buffer* buffer,
                                     size_t buffer_offset) {
  if (AsStore(c) == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return gdr::capi::StoreOp(c, gdrstore::OpKind::kWrite, volume, offset, n, buffer,
                            "cluster buffer", buffer_offset, nullptr);
}

gdrstore_status gdrstore_cluster_create_volume(gdrstore_cluster* cluster, const char* name,
                                               uint64_t stripe_unit, uint32_t replicas,
                                               const char* members, char** layout_json) {
  std::shared_ptr<ClusterHandle> c = Self<ClusterHandle>(cluster);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return CreateLayout(*c, name, stripe_unit, replicas, members, {}, layout_json);
}

gdrstore_status gdrstore_cluster_make_volume(gdrstore_cluster* cluster, const char* name,
                                             uint64_t size, uint64_t stripe_unit,
                                             uint32_t replicas, const char* members, int file,
                                             const char* media, char** layout_json) {
  std::shared_ptr<ClusterHandle> c = Self<ClusterHandle>(cluster);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (size == 0) return Invalid(*c, "size must be > 0 (the cluster volume's bytes)");
  gdrstore::ClusterClient::MemberVolumes make;
  make.size = size;
  make.file = file != 0;
  make.media = media != nullptr ? media : "";
  return CreateLayout(*c, name, stripe_unit, replicas, members, make, layout_json);
}

gdrstore_status gdrstore_cluster_delete_volume(gdrstore_cluster* cluster, const char* name,
                                               int member_volumes, int delete_files) {
  std::shared_ptr<ClusterHandle> c = Self<ClusterHandle>(cluster);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (name == nullptr || name[0] == '\0') return Invalid(*c, "a volume name is required");
  return Guard(*c, [&] {
    absl::Status st = c->cluster->DeleteVolume(name, member_volumes != 0, delete_files != 0);
    return st.ok() ? GDRSTORE_OK : c->Fail(st);
  });
}

gdrstore_status gdrstore_cluster_status_json(gdrstore_cluster* cluster, char** json) {
  std::shared_ptr<ClusterHandle> c = Self<ClusterHandle>(cluster);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (json == nullptr) return Invalid(*c, "json (the out pointer) is NULL");
  return Guard(*c, [&] {
    gdrstore::ClusterClient& cl = *c->cluster;
    return gdr::capi::MallocString(
        *c, gdr::cluster::StatusJson(cl.source(), cl.Members(), cl.Volumes()), json);
  });
}

}  // extern "C"
