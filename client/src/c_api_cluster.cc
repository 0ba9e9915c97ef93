// The cluster part of the C ABI (gdrstore/gdrstore.h, gdrstore_cluster_*) over the C++
// ClusterClient: handles, codes and messages as for a single daemon (c_api_handle.h).
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
#include "client/src/cluster/status_json.h"
#include "gdrstore/cluster.h"
#include "gdrstore/gdrstore.h"

namespace {

using gdr::capi::AsC;
using gdr::capi::CHandle;
using gdr::capi::FindAs;
using gdr::capi::Guard;
using gdr::capi::Invalid;
using gdr::capi::Kind;
using gdr::capi::Self;

// What a cluster's buffers know of it, shared so that it outlives the cluster: its handle value
// and whether gdrstore_cluster_close has run.
struct ClusterLife {
  std::atomic<gdr::capi::HandleId> id{0};
  std::atomic<bool> closed{false};
};

struct ClusterHandle : CHandle {
  static constexpr Kind kKind = Kind::kCluster;
  ClusterHandle() : CHandle(kKind) {}
  std::unique_ptr<gdrstore::ClusterClient> cluster;
  const std::shared_ptr<ClusterLife> life = std::make_shared<ClusterLife>();
};

// The C++ ClusterBuffer outlives its ClusterClient safely (its memory stays until it goes), so
// the buffer holds nothing of the cluster but what it knows of it.
struct ClusterBufferHandle : CHandle {
  static constexpr Kind kKind = Kind::kClusterBuffer;
  ClusterBufferHandle() : CHandle(kKind) {}
  std::unique_ptr<gdrstore::ClusterBuffer> buffer;
  std::shared_ptr<ClusterLife> cluster;
};

gdrstore_status WrapBuffer(const ClusterHandle& c,
                           absl::StatusOr<std::unique_ptr<gdrstore::ClusterBuffer>> made,
                           gdrstore_cluster_buffer** out) {
  if (!made.ok()) return c.Fail(made.status());
  auto b = std::make_shared<ClusterBufferHandle>();
  b->buffer = std::move(*made);
  b->cluster = c.life;
  *out = AsC<gdrstore_cluster_buffer>(gdr::capi::Register(std::move(b)));
  return GDRSTORE_OK;
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

gdrstore_status Op(gdrstore_cluster* cluster, bool put, const char* volume, uint64_t offset,
                   uint64_t n, gdrstore_cluster_buffer* buffer, size_t buffer_offset) {
  std::shared_ptr<ClusterHandle> c = Self<ClusterHandle>(cluster);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (volume == nullptr) return Invalid(*c, "volume is NULL");
  absl::StatusOr<std::shared_ptr<ClusterBufferHandle>> b =
      FindAs<ClusterBufferHandle>(buffer, "cluster buffer");
  if (!b.ok()) return c->Fail(b.status());
  if (const ClusterLife& owner = *(*b)->cluster; &owner != c->life.get()) {
    // Registered (or to be) through that cluster's transport, which alone reaches it.
    return Invalid(*c, absl::StrFormat("cluster buffer %#x belongs to cluster %#x%s, not to "
                                       "cluster %#x: make it with that cluster",
                                       (*b)->id, owner.id.load(),
                                       owner.closed.load() ? " (closed since)" : "", c->id));
  }
  return Guard(*c, [&] {
    const gdrstore::ClusterBuffer& mem = *(*b)->buffer;
    return c->Done(put ? c->cluster->Put(volume, offset, n, mem, buffer_offset)
                       : c->cluster->Get(volume, offset, n, mem, buffer_offset));
  });
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
    absl::StatusOr<std::unique_ptr<gdrstore::ClusterClient>> c =
        gdrstore::ClusterClient::Open(opts);
    if (!c.ok()) return fail(c.status());
    auto h = std::make_shared<ClusterHandle>();
    h->cluster = std::move(*c);
    std::shared_ptr<ClusterLife> life = h->life;
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
  if (c != nullptr) c->life->closed.store(true);
  // The cluster goes with the last reference: here, unless another thread is inside a call.
  // Its buffers stay (their memory too) until released.
}

gdrstore_status gdrstore_cluster_alloc_host(gdrstore_cluster* cluster, size_t n,
                                            gdrstore_cluster_buffer** out) {
  std::shared_ptr<ClusterHandle> c = Self<ClusterHandle>(cluster);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return Invalid(*c, "buffer (the out pointer) is NULL");
  return Guard(*c, [&] { return WrapBuffer(*c, c->cluster->AllocateBuffer(n), out); });
}

gdrstore_status gdrstore_cluster_register_host(gdrstore_cluster* cluster, void* p, size_t n,
                                               gdrstore_cluster_buffer** out) {
  std::shared_ptr<ClusterHandle> c = Self<ClusterHandle>(cluster);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return Invalid(*c, "buffer (the out pointer) is NULL");
  if (absl::Status s = gdr::capi::CheckMemory(p, n, "host memory"); !s.ok()) return c->Fail(s);
  return Guard(*c, [&] { return WrapBuffer(*c, c->cluster->RegisterHostMemory(p, n), out); });
}

gdrstore_status gdrstore_cluster_register_gpu(gdrstore_cluster* cluster, uint64_t device_ptr,
                                              size_t n, gdrstore_cluster_buffer** out) {
  std::shared_ptr<ClusterHandle> c = Self<ClusterHandle>(cluster);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return Invalid(*c, "buffer (the out pointer) is NULL");
  if (absl::Status s = gdr::capi::CheckAddressRange(device_ptr, n, "device pointer"); !s.ok()) {
    return c->Fail(s);
  }
  return Guard(*c, [&] {
    return WrapBuffer(*c, c->cluster->RegisterGpuMemory(device_ptr, n), out);
  });
}

void gdrstore_cluster_buffer_release(gdrstore_cluster_buffer* buffer) {
  gdr::capi::Unregister<ClusterBufferHandle>(buffer);  // goes with the last reference
}

void* gdrstore_cluster_buffer_data(const gdrstore_cluster_buffer* buffer) {
  std::shared_ptr<ClusterBufferHandle> b = Self<ClusterBufferHandle>(buffer);
  if (b == nullptr) return nullptr;
  // Device memory: its device pointer, as a cluster buffer always gave (Buffer::data() is a
  // host address only).
  return b->buffer->on_gpu() ? reinterpret_cast<void*>(b->buffer->address()) : b->buffer->data();
}

size_t gdrstore_cluster_buffer_size(const gdrstore_cluster_buffer* buffer) {
  std::shared_ptr<ClusterBufferHandle> b = Self<ClusterBufferHandle>(buffer);
  return b == nullptr ? 0 : b->buffer->size();
}

gdrstore_status gdrstore_cluster_put(gdrstore_cluster* c, const char* volume, uint64_t offset,
                                     uint64_t n, gdrstore_cluster_buffer* buffer,
                                     size_t buffer_offset) {
  return Op(c, true, volume, offset, n, buffer, buffer_offset);
}

gdrstore_status gdrstore_cluster_get(gdrstore_cluster* c, const char* volume, uint64_t offset,
                                     uint64_t n, gdrstore_cluster_buffer* buffer,
                                     size_t buffer_offset) {
  return Op(c, false, volume, offset, n, buffer, buffer_offset);
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
