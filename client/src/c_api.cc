// The C ABI (gdrstore/gdrstore.h) over the C++ Client. Every entry point looks its handles up
// in the table of live ones, checks its pointers and sizes, catches what the C++ side could
// throw, turns absl::Status into a code plus the calling thread's message, and never calls
// into the caller: stream answers are queued here until gdrstore_poll collects them.
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
#include "client/src/transport/region.h"
#include "common/base/pattern.h"
#include "gdrstore/client.h"

namespace {

using gdr::capi::AsC;
using gdr::capi::CHandle;
using gdr::capi::CheckAddressRange;
using gdr::capi::CheckExtent;
using gdr::capi::CheckMemory;
using gdr::capi::CopyMessage;
using gdr::capi::CopyText;
using gdr::capi::FindAs;
using gdr::capi::Guard;
using gdr::capi::Invalid;
using gdr::capi::Kind;
using gdr::capi::Self;

struct StreamHandle;

// What a client's buffers and streams know of it, shared so that it outlives the client: its
// handle value, whether gdrstore_client_close has run, and its streams (which that ends).
struct ClientLife {
  std::atomic<gdr::capi::HandleId> id{0};
  std::atomic<bool> closed{false};
  absl::Mutex mu;
  std::vector<std::weak_ptr<StreamHandle>> streams ABSL_GUARDED_BY(mu);
};

struct ClientHandle : CHandle {
  static constexpr Kind kKind = Kind::kClient;
  ClientHandle() : CHandle(kKind) {}
  std::unique_ptr<gdrstore::Client> client;
  const std::shared_ptr<ClientLife> life = std::make_shared<ClientLife>();
};

// A buffer or stream keeps no reference to its client's objects: the C++ Buffer and OpStream
// outlive their Client safely, so a client closed first is really closed (its transport too).
struct BufferHandle : CHandle {
  static constexpr Kind kKind = Kind::kBuffer;
  BufferHandle() : CHandle(kKind) {}
  std::unique_ptr<gdrstore::Buffer> buffer;
  std::shared_ptr<ClientLife> client;
};

struct StreamHandle : CHandle {
  static constexpr Kind kKind = Kind::kStream;
  StreamHandle() : CHandle(kKind) {}
  std::unique_ptr<gdrstore::OpStream> stream;
  std::shared_ptr<ClientLife> client;
  absl::Mutex done_mu;
  absl::CondVar done_cv;
  std::deque<gdrstore_completion> done ABSL_GUARDED_BY(done_mu);
  size_t outstanding ABSL_GUARDED_BY(done_mu) = 0;  // submitted, not yet polled
};

// OK when buffer `b` may carry an op of the client `life` describes (`user`: the op's client
// or stream, for the message): a buffer belongs to the client it was made with, whose
// transport alone reaches its memory.
absl::Status SameClient(const BufferHandle& b, const ClientLife& life, const std::string& user) {
  if (b.client.get() == &life) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "buffer %#x belongs to client %#x%s, not to %s: register the memory with that client",
      b.id, b.client->id.load(), b.client->closed.load() ? " (closed since)" : "", user));
}

// FAILED_PRECONDITION when the stream's client has been closed.
absl::Status ClientOpen(const StreamHandle& s) {
  if (!s.client->closed.load()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "stream %#x belongs to client %#x, which was closed (gdrstore_client_close): only "
      "gdrstore_poll, gdrstore_stream_outstanding and gdrstore_stream_close work on it",
      s.id, s.client->id.load()));
}

gdrstore_status WrapBuffer(const ClientHandle& c,
                           absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> made,
                           gdrstore_buffer** out) {
  if (!made.ok()) return c.Fail(made.status());
  auto b = std::make_shared<BufferHandle>();
  b->buffer = std::move(*made);
  b->client = c.life;
  *out = AsC<gdrstore_buffer>(gdr::capi::Register(std::move(b)));
  return GDRSTORE_OK;
}

gdrstore_status Json(const ClientHandle& c, const google::protobuf::Message& m, char** json) {
  absl::StatusOr<std::string> text = gdr::capi::ToJson(m);
  if (!text.ok()) return c.Fail(text.status());
  return gdr::capi::MallocString(c, *text, json);
}

// gdrstore_last_path's answer: this thread's last successful blocking op, and its client.
struct LastPath {
  const gdrstore_client* client = nullptr;
  std::string path;
};
thread_local LastPath t_last_path;

gdrstore_status Op(gdrstore_client* client, gdrstore::OpKind kind, const char* volume,
                   uint64_t offset, uint64_t n, gdrstore_buffer* buffer, size_t buffer_offset,
                   gdrstore_result* result) {
  t_last_path = LastPath{};  // a call that fails leaves no path
  std::shared_ptr<ClientHandle> c = Self<ClientHandle>(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (volume == nullptr) return Invalid(*c, "volume is NULL");
  absl::StatusOr<std::shared_ptr<BufferHandle>> b = FindAs<BufferHandle>(buffer, "buffer");
  if (!b.ok()) return c->Fail(b.status());
  if (absl::Status st = SameClient(**b, *c->life, absl::StrFormat("client %#x", c->id));
      !st.ok()) {
    return c->Fail(st);
  }
  return Guard(*c, [&] {
    const gdrstore::Extent extent{volume, offset, n};
    absl::StatusOr<gdrstore::OpResult> r =
        kind == gdrstore::OpKind::kWrite
            ? c->client->Write(extent, *(*b)->buffer, buffer_offset)
            : c->client->Read(extent, *(*b)->buffer, buffer_offset,
                              {.sync = kind == gdrstore::OpKind::kReadSync});
    if (!r.ok()) return c->Fail(r.status());
    if (result != nullptr) *result = gdrstore_result{r->bytes, r->service_ns};
    t_last_path = LastPath{client, std::move(r->path)};
    return GDRSTORE_OK;
  });
}

gdrstore_status Submit(gdrstore_stream* stream, gdrstore::OpKind kind, const char* volume,
                       uint64_t offset, uint64_t n, gdrstore_buffer* buffer,
                       size_t buffer_offset, uint64_t tag) {
  std::shared_ptr<StreamHandle> s = Self<StreamHandle>(stream);
  if (s == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (volume == nullptr) return Invalid(*s, "volume is NULL");
  if (absl::Status st = ClientOpen(*s); !st.ok()) return s->Fail(st);
  absl::StatusOr<std::shared_ptr<BufferHandle>> b = FindAs<BufferHandle>(buffer, "buffer");
  if (!b.ok()) return s->Fail(b.status());
  if (absl::Status st = SameClient(**b, *s->client,
                                   absl::StrFormat("client %#x of stream %#x",
                                                   s->client->id.load(), s->id));
      !st.ok()) {
    return s->Fail(st);
  }
  return Guard(*s, [&] {
    {
      absl::MutexLock lock(&s->done_mu);
      ++s->outstanding;
    }
    // The callback may outlive this call but not the stream: gdrstore_stream_close waits for
    // every op to be answered before the last reference to the handle goes.
    StreamHandle* raw = s.get();
    s->stream->Submit(kind, gdrstore::Extent{volume, offset, n}, *(*b)->buffer, buffer_offset,
                      [raw, tag](absl::StatusOr<gdrstore::OpResult> r) {
                        gdrstore_completion c{};
                        c.tag = tag;
                        c.status = static_cast<gdrstore_status>(r.status().code());
                        if (r.ok()) {
                          c.bytes = r->bytes;
                          c.service_ns = r->service_ns;
                          CopyText(r->path, c.message, sizeof(c.message));
                        } else {
                          CopyMessage(r.status(), c.message, sizeof(c.message));
                        }
                        absl::MutexLock lock(&raw->done_mu);
                        raw->done.push_back(c);
                        raw->done_cv.SignalAll();
                      });
    return GDRSTORE_OK;
  });
}

}  // namespace

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
  return client != nullptr && t_last_path.client == client ? t_last_path.path.c_str() : "";
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
    std::shared_ptr<ClientLife> life = h->life;
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
  std::vector<std::shared_ptr<StreamHandle>> streams;
  {
    absl::MutexLock lock(&c->life->mu);
    c->life->closed.store(true);  // from here its streams take no op, and open none
    for (const std::weak_ptr<StreamHandle>& w : c->life->streams) {
      if (std::shared_ptr<StreamHandle> s = w.lock()) streams.push_back(std::move(s));
    }
    c->life->streams.clear();
  }
  // Its open streams end as gdrstore_stream_close would end them (every op answered, each
  // within its deadline), their answers kept for gdrstore_poll; each handle stays live until
  // gdrstore_stream_close, which returns the call's status. Buffers need nothing: their memory
  // stays until they are released.
  for (const std::shared_ptr<StreamHandle>& s : streams) {
    try {
      (void)s->stream->Close();
    } catch (...) {
      // Nothing crosses the C boundary; gdrstore_stream_close reports the call's end.
    }
  }
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
  std::shared_ptr<ClientHandle> c = Self<ClientHandle>(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (name == nullptr) return Invalid(*c, "name is NULL");
  return Guard(*c, [&] {
    absl::StatusOr<bool> made =
        c->client->CreateVolume(name, size, file != 0, media == nullptr ? "" : media);
    if (!made.ok()) return c->Fail(made.status());
    if (created != nullptr) *created = *made ? 1 : 0;
    return GDRSTORE_OK;
  });
}

gdrstore_status gdrstore_volume_delete(gdrstore_client* client, const char* name,
                                       int delete_file) {
  std::shared_ptr<ClientHandle> c = Self<ClientHandle>(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (name == nullptr) return Invalid(*c, "name is NULL");
  return Guard(*c, [&] {
    absl::Status s = c->client->DeleteVolume(name, delete_file != 0);
    return s.ok() ? GDRSTORE_OK : c->Fail(s);
  });
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
  std::shared_ptr<ClientHandle> c = Self<ClientHandle>(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return Invalid(*c, "buffer (the out pointer) is NULL");
  if (absl::Status s = CheckMemory(p, n, "host memory"); !s.ok()) return c->Fail(s);
  return Guard(*c, [&] { return WrapBuffer(*c, c->client->RegisterHostMemory(p, n), out); });
}

gdrstore_status gdrstore_register_gpu(gdrstore_client* client, uint64_t device_ptr, size_t n,
                                      gdrstore_buffer** out) {
  std::shared_ptr<ClientHandle> c = Self<ClientHandle>(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return Invalid(*c, "buffer (the out pointer) is NULL");
  if (absl::Status s = CheckAddressRange(device_ptr, n, "device pointer"); !s.ok()) {
    return c->Fail(s);
  }
  return Guard(*c, [&] {
    return WrapBuffer(*c, c->client->RegisterGpuMemory(device_ptr, n), out);
  });
}

gdrstore_status gdrstore_alloc_host(gdrstore_client* client, size_t n, gdrstore_buffer** out) {
  std::shared_ptr<ClientHandle> c = Self<ClientHandle>(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return Invalid(*c, "buffer (the out pointer) is NULL");
  return Guard(*c, [&] { return WrapBuffer(*c, c->client->AllocateBuffer(n), out); });
}

gdrstore_status gdrstore_alloc_gpu(gdrstore_client* client, const char* gpu, size_t n,
                                   gdrstore_buffer** out) {
  std::shared_ptr<ClientHandle> c = Self<ClientHandle>(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return Invalid(*c, "buffer (the out pointer) is NULL");
  if (gpu == nullptr) return Invalid(*c, "gpu is required (PCI address or CUDA ordinal)");
  return Guard(*c, [&] { return WrapBuffer(*c, c->client->AllocateGpuBuffer(gpu, n), out); });
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
  return Op(c, gdrstore::OpKind::kWrite, volume, offset, n, buffer, buffer_offset, result);
}

gdrstore_status gdrstore_put(gdrstore_client* c, gdrstore_buffer* buffer, size_t buffer_offset,
                             const char* volume, uint64_t offset, uint64_t n, int sync,
                             gdrstore_result* result) {
  return Op(c, sync ? gdrstore::OpKind::kReadSync : gdrstore::OpKind::kRead, volume, offset, n,
            buffer, buffer_offset, result);
}

gdrstore_status gdrstore_stream_open(gdrstore_client* client, gdrstore_stream** out) {
  std::shared_ptr<ClientHandle> c = Self<ClientHandle>(client);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return Invalid(*c, "stream (the out pointer) is NULL");
  return Guard(*c, [&] {
    absl::StatusOr<std::unique_ptr<gdrstore::OpStream>> s = c->client->OpenStream();
    if (!s.ok()) return c->Fail(s.status());
    auto h = std::make_shared<StreamHandle>();
    h->stream = std::move(*s);
    h->client = c->life;
    {
      // Listed for gdrstore_client_close, unless that has begun on another thread.
      absl::MutexLock lock(&c->life->mu);
      if (c->life->closed.load()) {
        return c->Fail(absl::FailedPreconditionError(
            absl::StrFormat("client %#x was closed (gdrstore_client_close)", c->id)));
      }
      std::vector<std::weak_ptr<StreamHandle>>& list = c->life->streams;
      list.erase(std::remove_if(list.begin(), list.end(),
                                [](const std::weak_ptr<StreamHandle>& w) { return w.expired(); }),
                 list.end());
      list.push_back(h);
    }
    *out = AsC<gdrstore_stream>(gdr::capi::Register(std::move(h)));
    return GDRSTORE_OK;
  });
}

gdrstore_status gdrstore_stream_get(gdrstore_stream* s, const char* volume, uint64_t offset,
                                    uint64_t n, gdrstore_buffer* buffer, size_t buffer_offset,
                                    uint64_t tag) {
  return Submit(s, gdrstore::OpKind::kWrite, volume, offset, n, buffer, buffer_offset, tag);
}

gdrstore_status gdrstore_stream_put(gdrstore_stream* s, gdrstore_buffer* buffer,
                                    size_t buffer_offset, const char* volume, uint64_t offset,
                                    uint64_t n, uint64_t tag) {
  return Submit(s, gdrstore::OpKind::kRead, volume, offset, n, buffer, buffer_offset, tag);
}

gdrstore_status gdrstore_poll(gdrstore_stream* stream, gdrstore_completion* completions,
                              size_t max, int timeout_ms, size_t* count) {
  std::shared_ptr<StreamHandle> s = Self<StreamHandle>(stream);
  if (s == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (count == nullptr) return Invalid(*s, "count (the out pointer) is NULL");
  *count = 0;
  if (max > SIZE_MAX / sizeof(gdrstore_completion)) {
    return Invalid(*s, absl::StrCat("max ", max, " completions do not fit in memory"));
  }
  if (absl::Status st = CheckMemory(completions, max * sizeof(gdrstore_completion),
                                    "completions");
      !st.ok()) {
    return s->Fail(st);
  }
  absl::MutexLock lock(&s->done_mu);
  if (timeout_ms != 0) {
    const absl::Time deadline =
        timeout_ms < 0 ? absl::InfiniteFuture() : absl::Now() + absl::Milliseconds(timeout_ms);
    while (s->done.empty() && s->outstanding > 0 &&
           !s->done_cv.WaitWithDeadline(&s->done_mu, deadline)) {
    }
  }
  while (*count < max && !s->done.empty()) {
    completions[(*count)++] = s->done.front();
    s->done.pop_front();
    --s->outstanding;
  }
  return GDRSTORE_OK;
}

size_t gdrstore_stream_outstanding(const gdrstore_stream* stream) {
  std::shared_ptr<StreamHandle> s = Self<StreamHandle>(stream);
  if (s == nullptr) return 0;
  absl::MutexLock lock(&s->done_mu);
  return s->outstanding;
}

gdrstore_status gdrstore_stream_close(gdrstore_stream* stream) {
  // Out of the table first, so that no submission races the close; the failure (if any) stays
  // readable with gdrstore_error(stream) on this thread.
  std::shared_ptr<StreamHandle> s = gdr::capi::Unregister<StreamHandle>(stream);
  if (s == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return Guard(*s, [&] { return s->Done(s->stream->Close()); });
}

}  // extern "C"
