// The C ABI (gdrstore/gdrstore.h) over a gdrstore::Store: a Client, or a cluster's ClusterClient
// (c_api_cluster.cc opens those; streams are c_api_stream.cc's). Every entry point looks its
// handles up in the table of live ones, checks its pointers and sizes, catches what the C++
// side could throw, and turns absl::Status into a code plus the calling thread's message.
#include "gdrstore/gdrstore.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/src/c_api_handle.h"
#include "client/src/c_api_store.h"
#include "client/src/transport/region.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"

namespace gdr::capi {

std::string StoreLife::Name() const {
  return absl::StrFormat("%s %#x", KindName(kind), id.load());
}

absl::StatusOr<std::shared_ptr<StoreHandle>> FindStore(const void* handle, const char* what) {
  absl::StatusOr<std::shared_ptr<CHandle>> h = Find(handle, Kind::kClient, what);
  if (!h.ok() && IsLive(handle)) {
    // Either store kind will do; the refusal names both.
    h = Find(handle, Kind::kCluster, what);
    if (!h.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          h.status().message(), " (a client or cluster handle is needed)"));
    }
  }
  if (!h.ok()) return h.status();
  return std::static_pointer_cast<StoreHandle>(*std::move(h));
}

std::shared_ptr<StoreHandle> SelfStore(const void* handle) {
  absl::StatusOr<std::shared_ptr<StoreHandle>> h = FindStore(handle, "client");
  if (!h.ok()) {
    RecordFailure(IdOf(handle), h.status());
    return nullptr;
  }
  return *std::move(h);
}

absl::Status SameStore(const BufferHandle& b, const StoreLife& life, const std::string& user) {
  if (b.owner.get() == &life) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "buffer %#x belongs to %s%s, not to %s: make or register the memory with that %s", b.id,
      b.owner->Name(), b.owner->closed.load() ? " (closed since)" : "", user,
      KindName(life.kind)));
}

gdrstore_status WrapBuffer(const StoreHandle& s,
                           absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> made,
                           gdrstore_buffer** out) {
  if (!made.ok()) return s.Fail(made.status());
  auto b = std::make_shared<BufferHandle>();
  b->buffer = std::move(*made);
  b->owner = s.life;
  *out = AsC<gdrstore_buffer>(Register(std::move(b)));
  return GDRSTORE_OK;
}

}  // namespace gdr::capi

namespace {

using gdr::capi::AsC;
using gdr::capi::BufferHandle;
using gdr::capi::CHandle;
using gdr::capi::CheckAddressRange;
using gdr::capi::CheckExtent;
using gdr::capi::CheckMemory;
using gdr::capi::CopyMessage;
using gdr::capi::FindAs;
using gdr::capi::Guard;
using gdr::capi::Invalid;
using gdr::capi::Kind;
using gdr::capi::Self;
using gdr::capi::SelfStore;
using gdr::capi::StoreHandle;
using gdr::capi::WrapBuffer;

struct ClientHandle : StoreHandle {
  static constexpr Kind kKind = Kind::kClient;
  ClientHandle() : StoreHandle(kKind) {}
  gdrstore::Store& store() const override { return *client; }
  std::unique_ptr<gdrstore::Client> client;
};

gdrstore_status Json(const ClientHandle& c, const google::protobuf::Message& m, char** json) {
  absl::StatusOr<std::string> text = gdr::capi::ToJson(m);
  if (!text.ok()) return c.Fail(text.status());
  return gdr::capi::MallocString(c, *text, json);
}

// gdrstore_last_path's answer: this thread's last successful blocking op, and its client.
struct LastPath {
  const void* store = nullptr;
  std::string path;
};
thread_local LastPath t_last_path;

}  // namespace

namespace gdr::capi {

gdrstore_status StoreOp(const void* store, gdrstore::OpKind kind, const char* volume,
                        uint64_t offset, uint64_t n, const void* buffer,
                        const char* buffer_what, size_t buffer_offset, gdrstore_result* result) {
  t_last_path = LastPath{};  // a call that fails leaves no path
  std::shared_ptr<StoreHandle> c = SelfStore(store);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (volume == nullptr) return Invalid(*c, "volume is NULL");
  absl::StatusOr<std::shared_ptr<BufferHandle>> b = FindAs<BufferHandle>(buffer, buffer_what);
  if (!b.ok()) return c->Fail(b.status());
  if (absl::Status st = SameStore(**b, *c->life, c->life->Name()); !st.ok()) return c->Fail(st);
  return Guard(*c, [&] {
    const bool sync = kind == gdrstore::OpKind::kReadSync;
    absl::StatusOr<gdrstore::OpResult> r = c->store().Submit(
        sync ? gdrstore::OpKind::kRead : kind, gdrstore::Extent{volume, offset, n},
        *(*b)->buffer, buffer_offset, {.sync = sync});
    if (!r.ok()) return c->Fail(r.status());
    if (result != nullptr) *result = gdrstore_result{r->bytes, r->service_ns};
    t_last_path = LastPath{store, std::move(r->path)};
    return GDRSTORE_OK;
  });
}

}  // namespace gdr::capi

extern "C" {

uint32_t gdrstore_abi_version(void) { return GDRSTORE_ABI_VERSION; }

const char* gdrstore_status_name(gdrstore_status status) {
  static const char* const kNames[] = {
      "OK",           "CANCELLED",          "UNKNOWN",           "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED", "NOT_FOUND",     "ALREADY_EXISTS",    "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",    "OUT_OF_RANGE",
      "UNIMPLEMENTED", "INTERNAL",          "UNAVAILABLE",       "DATA_LOSS",
      "UNAUTHENTICATED"};
  const int i = static_cast<int>(status);
  return i >= 0 && i < static_cast<int>(std::size(kNames)) ? kNames[i] : "UNKNOWN";
}

const char* gdrstore_last_path(const gdrstore_client* client) {
  return client != nullptr && t_last_path.store == client ? t_last_path.path.c_str() : "";
}

const char* gdrstore_error(const void* handle) {
  // The calling thread's own last failure on the handle (which stays readable after the call
  // that released it failed); a handle this thread never failed on is "" when live, and says
  // why when it is not.
  if (const char* m = gdr::capi::FailureMessage(gdr::capi::IdOf(handle)); m != nullptr) return m;
  if (handle == nullptr) return "no handle (NULL)";
  if (gdr::capi::IsLive(handle)) return "";
  return "not a live handle (released already, or never returned by this library)";
}

void gdrstore_client_options_init(gdrstore_client_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
  o->rpc_timeout_ms = 120000;
}

gdrstore_status gdrstore_client_open(const gdrstore_client_options* o, gdrstore_client** client,
                                     char* error, size_t error_len) {
  auto fail = [&](const absl::Status& s) {
    CopyMessage(s, error, error_len);
    return static_cast<gdrstore_status>(s.code());
  };
  if (client == nullptr) return fail(absl::InvalidArgumentError("client (the out pointer) is NULL"));
  *client = nullptr;
  try {
    absl::StatusOr<gdrstore::ClientOptions> opts =
        gdr::capi::ClientOptionsFromC(o, gdr::capi::EnvironmentUse::kClient);
    if (!opts.ok()) return fail(opts.status());
    absl::StatusOr<std::unique_ptr<gdrstore::Client>> c = gdrstore::Client::Connect(*opts);
    if (!c.ok()) return fail(c.status());
    auto h = std::make_shared<ClientHandle>();
    h->client = std::move(*c);
    std::shared_ptr<gdr::capi::StoreLife> life = h->life;
    const gdr::capi::HandleId id = gdr::capi::Register(std::move(h));
    life->id.store(id);
    *client = AsC<gdrstore_client>(id);
    return GDRSTORE_OK;
  } catch (const std::exception& e) {
    return fail(absl::InternalError(absl::StrCat("unexpected C++ exception: ", e.what())));
  }
}

void gdrstore_client_close(gdrstore_client* client) {
  std::shared_ptr<ClientHandle> c = gdr::capi::Unregister<ClientHandle>(client);
  if (c == nullptr) return;  // closed already (or never a client): nothing more
  // Its open streams end as gdrstore_stream_close would end them (every op answered, each
  // within its deadline), their answers kept for gdrstore_poll; each handle stays live until
  // gdrstore_stream_close, which returns the call's status. Buffers need nothing: their memory
  // stays until they are released.
  gdr::capi::EndStreams(*c->life);
  // The client goes with the last reference: here, unless another thread is inside a call.
}

gdrstore_status gdrstore_info_json(gdrstore_client* client, char** json) {
  std::shared_ptr<ClientHandle> c = Self<ClientHandle>(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (json == nullptr) return Invalid(*c, "json (the out pointer) is NULL");
  return Guard(*c, [&] {
    absl::StatusOr<gdrstore::v1::GetInfoResponse> info = c->client->GetInfo();
    if (!info.ok()) return c->Fail(info.status());
    return Json(*c, *info, json);
  });
}

gdrstore_status gdrstore_volume_info_json(gdrstore_client* client, const char* volume,
                                          char** json) {
  std::shared_ptr<ClientHandle> c = Self<ClientHandle>(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (volume == nullptr) return Invalid(*c, "volume is NULL");
  if (json == nullptr) return Invalid(*c, "json (the out pointer) is NULL");
  return Guard(*c, [&] {
    absl::StatusOr<gdrstore::v1::GetInfoResponse> info = c->client->GetVolumeInfo(volume);
    if (!info.ok()) return c->Fail(info.status());
    return Json(*c, *info, json);
  });
}

gdrstore_status gdrstore_volume_create(gdrstore_client* client, const char* name, uint64_t size,
                                       int file, const char* media, int* created) {
  std::shared_ptr<StoreHandle> c = SelfStore(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (name == nullptr) return Invalid(*c, "name is NULL");
  return Guard(*c, [&] {
    if (c->kind == Kind::kClient) {
      // A daemon says whether it made the file now or serves one that was there.
      absl::StatusOr<bool> made = static_cast<ClientHandle&>(*c).client->CreateVolume(
          name, size, file != 0, media == nullptr ? "" : media);
      if (!made.ok()) return c->Fail(made.status());
      if (created != nullptr) *created = *made ? 1 : 0;
      return GDRSTORE_OK;
    }
    gdrstore::StoreVolumeSpec spec;
    spec.name = name;
    spec.size = size;
    spec.file = file != 0;
    spec.media = media == nullptr ? "" : media;
    if (absl::Status st = c->store().CreateVolume(spec); !st.ok()) return c->Fail(st);
    if (created != nullptr) *created = 1;
    return GDRSTORE_OK;
  });
}

gdrstore_status gdrstore_volume_delete(gdrstore_client* client, const char* name,
                                       int delete_file) {
  std::shared_ptr<StoreHandle> c = SelfStore(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (name == nullptr) return Invalid(*c, "name is NULL");
  return Guard(*c, [&] { return c->Done(c->store().DeleteVolume(name, delete_file != 0)); });
}

gdrstore_status gdrstore_stats_json(gdrstore_client* client, char** json) {
  std::shared_ptr<ClientHandle> c = Self<ClientHandle>(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (json == nullptr) return Invalid(*c, "json (the out pointer) is NULL");
  return Guard(*c, [&] {
    absl::StatusOr<gdrstore::v1::GetStatsResponse> stats = c->client->GetStats();
    if (!stats.ok()) return c->Fail(stats.status());
    return Json(*c, *stats, json);
  });
}

void gdrstore_free(void* p) { std::free(p); }

gdrstore_status gdrstore_register_host(gdrstore_client* client, void* p, size_t n,
                                       gdrstore_buffer** out) {
  std::shared_ptr<StoreHandle> c = SelfStore(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return Invalid(*c, "buffer (the out pointer) is NULL");
  if (absl::Status s = CheckMemory(p, n, "host memory"); !s.ok()) return c->Fail(s);
  return Guard(*c, [&] { return WrapBuffer(*c, c->store().RegisterHostMemory(p, n), out); });
}

gdrstore_status gdrstore_register_gpu(gdrstore_client* client, uint64_t device_ptr, size_t n,
                                      gdrstore_buffer** out) {
  std::shared_ptr<StoreHandle> c = SelfStore(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return Invalid(*c, "buffer (the out pointer) is NULL");
  if (absl::Status s = CheckAddressRange(device_ptr, n, "device pointer"); !s.ok()) {
    return c->Fail(s);
  }
  return Guard(*c, [&] {
    return WrapBuffer(*c, c->store().RegisterGpuMemory(device_ptr, n), out);
  });
}

gdrstore_status gdrstore_alloc_host(gdrstore_client* client, size_t n, gdrstore_buffer** out) {
  std::shared_ptr<StoreHandle> c = SelfStore(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return Invalid(*c, "buffer (the out pointer) is NULL");
  return Guard(*c, [&] { return WrapBuffer(*c, c->store().AllocateBuffer(n), out); });
}

gdrstore_status gdrstore_alloc_gpu(gdrstore_client* client, const char* gpu, size_t n,
                                   gdrstore_buffer** out) {
  std::shared_ptr<StoreHandle> c = SelfStore(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return Invalid(*c, "buffer (the out pointer) is NULL");
  if (gpu == nullptr) return Invalid(*c, "gpu is required (PCI address or CUDA ordinal)");
  return Guard(*c, [&] { return WrapBuffer(*c, c->store().AllocateGpuBuffer(gpu, n), out); });
}

void gdrstore_buffer_release(gdrstore_buffer* buffer) {
  // Out of the table at once; the Buffer (whose destructor waits for its ops) goes with the
  // last reference, here unless another thread is inside a call with it.
  gdr::capi::Unregister<BufferHandle>(buffer);
}

void gdrstore_buffer_get_info(const gdrstore_buffer* buffer, gdrstore_buffer_info* info) {
  if (info == nullptr) return;
  *info = gdrstore_buffer_info{};
  info->gpu_ordinal = -1;
  std::shared_ptr<BufferHandle> b = Self<BufferHandle>(buffer);
  if (b == nullptr) return;
  info->host = b->buffer->data();
  info->address = b->buffer->address();
  info->size = b->buffer->size();
  info->gpu_ordinal = b->buffer->gpu_ordinal();
  info->writable = b->buffer->writable() ? 1 : 0;
}

gdrstore_status gdrstore_buffer_copy_in(gdrstore_buffer* buffer, size_t offset, const void* src,
                                        size_t n) {
  std::shared_ptr<BufferHandle> b = Self<BufferHandle>(buffer);
  if (b == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (absl::Status s = CheckMemory(src, n, "src"); !s.ok()) return b->Fail(s);
  return Guard(*b, [&] { return b->Done(b->buffer->CopyIn(offset, src, n)); });
}

gdrstore_status gdrstore_buffer_copy_out(gdrstore_buffer* buffer, size_t offset, void* dst,
                                         size_t n) {
  std::shared_ptr<BufferHandle> b = Self<BufferHandle>(buffer);
  if (b == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (absl::Status s = CheckMemory(dst, n, "dst"); !s.ok()) return b->Fail(s);
  return Guard(*b, [&] { return b->Done(b->buffer->CopyOut(offset, dst, n)); });
}

gdrstore_status gdrstore_verify(gdrstore_buffer* buffer, size_t offset, size_t n,
                                const char* volume, uint64_t volume_offset, uint64_t* first_bad) {
  std::shared_ptr<BufferHandle> b = Self<BufferHandle>(buffer);
  if (b == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (volume == nullptr) return Invalid(*b, "volume is NULL");
  if (absl::Status s = gdr::CheckRange(offset, n, b->buffer->size(),
                                       absl::StatusCode::kOutOfRange);
      !s.ok()) {
    return b->Fail(s);
  }
  if (absl::Status s = CheckExtent(volume_offset, n, "volume range"); !s.ok()) return b->Fail(s);
  return Guard(*b, [&] {
    const uint64_t seed = gdr::PatternSeed(volume);
    std::vector<std::byte> chunk(std::min<size_t>(n, 4 << 20));
    for (size_t done = 0; done < n;) {
      const size_t len = std::min(chunk.size(), n - done);
      if (absl::Status s = b->buffer->CopyOut(offset + done, chunk.data(), len); !s.ok()) {
        return b->Fail(s);
      }
      if (auto bad = gdr::PatternMismatch(seed, volume_offset + done, std::span(chunk.data(), len))) {
        if (first_bad != nullptr) *first_bad = done + *bad;
        return b->Fail(absl::DataLossError(absl::StrCat(
            "byte ", done + *bad, " of the buffer differs from ", volume, " at ",
            volume_offset + done + *bad)));
      }
      done += len;
    }
    return GDRSTORE_OK;
  });
}

gdrstore_status gdrstore_pattern_check(const void* data, size_t n, const char* volume,
                                       uint64_t volume_offset, uint64_t* first_bad) {
  // No handle to carry a message: the failures are recorded on NULL (gdrstore_error(NULL)).
  if (volume == nullptr) {
    return gdr::capi::RecordFailure(0, absl::InvalidArgumentError("volume is NULL"));
  }
  if (absl::Status s = CheckMemory(data, n, "data"); !s.ok()) {
    return gdr::capi::RecordFailure(0, s);
  }
  if (absl::Status s = CheckExtent(volume_offset, n, "volume range"); !s.ok()) {
    return gdr::capi::RecordFailure(0, s);
  }
  const auto* bytes = static_cast<const std::byte*>(data);
  if (auto bad = gdr::PatternMismatch(gdr::PatternSeed(volume), volume_offset,
                                      std::span(bytes, n))) {
    if (first_bad != nullptr) *first_bad = *bad;
    return GDRSTORE_DATA_LOSS;
  }
  return GDRSTORE_OK;
}

gdrstore_status gdrstore_get(gdrstore_client* c, const char* volume, uint64_t offset, uint64_t n,
                             gdrstore_buffer* buffer, size_t buffer_offset,
                             gdrstore_result* result) {
  return gdr::capi::StoreOp(c, gdrstore::OpKind::kWrite, volume, offset, n, buffer, "buffer",
                            buffer_offset, result);
}

gdrstore_status gdrstore_put(gdrstore_client* c, gdrstore_buffer* buffer, size_t buffer_offset,
                             const char* volume, uint64_t offset, uint64_t n, int sync,
                             gdrstore_result* result) {
  return gdr::capi::StoreOp(c, sync ? gdrstore::OpKind::kReadSync : gdrstore::OpKind::kRead,
                            volume, offset, n, buffer, "buffer", buffer_offset, result);
}

}  // extern "C"
