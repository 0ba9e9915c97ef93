// The C ABI (gdrstore/gdrstore.h) over the C++ Client. Every entry point catches what the C++
// side could throw, turns absl::Status into a code plus the handle's message, and never calls
// into the caller: stream answers are queued here until gdrstore_poll collects them.
#include "gdrstore/gdrstore.h"

#include <algorithm>
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
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/src/c_api_handle.h"
#include "common/pattern.h"
#include "gdrstore/client.h"

struct gdrstore_client : gdr::capi::CHandle {
  std::unique_ptr<gdrstore::Client> client;
};

struct gdrstore_buffer : gdr::capi::CHandle {
  std::unique_ptr<gdrstore::Buffer> buffer;
};

struct gdrstore_stream : gdr::capi::CHandle {
  std::unique_ptr<gdrstore::OpStream> stream;
  absl::Mutex done_mu;
  absl::CondVar done_cv;
  std::deque<gdrstore_completion> done ABSL_GUARDED_BY(done_mu);
  size_t outstanding ABSL_GUARDED_BY(done_mu) = 0;  // submitted, not yet polled
};

namespace {

using gdr::capi::CopyMessage;
using gdr::capi::Guard;
using gdr::capi::Invalid;

gdrstore_status WrapBuffer(gdrstore_client* c,
                           absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> made,
                           gdrstore_buffer** out) {
  if (!made.ok()) return c->Fail(made.status());
  auto* b = new gdrstore_buffer();
  b->buffer = std::move(*made);
  *out = b;
  return GDRSTORE_OK;
}

gdrstore_status Json(gdrstore_client* c, const google::protobuf::Message& m, char** json) {
  absl::StatusOr<std::string> text = gdr::capi::ToJson(m);
  if (!text.ok()) return c->Fail(text.status());
  return gdr::capi::MallocString(c, *text, json);
}

gdrstore_status Op(gdrstore_client* c, gdrstore::OpKind kind, const char* volume,
                   uint64_t offset, uint64_t n, gdrstore_buffer* buffer, size_t buffer_offset,
                   gdrstore_result* result) {
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (volume == nullptr || buffer == nullptr) return Invalid(c, "volume and buffer are required");
  return Guard(c, [&] {
    const gdrstore::Extent extent{volume, offset, n};
    absl::StatusOr<gdrstore::OpResult> r =
        kind == gdrstore::OpKind::kWrite
            ? c->client->Write(extent, *buffer->buffer, buffer_offset)
            : c->client->Read(extent, *buffer->buffer, buffer_offset,
                              kind == gdrstore::OpKind::kReadSync);
    if (!r.ok()) return c->Fail(r.status());
    if (result != nullptr) *result = gdrstore_result{r->bytes, r->service_ns};
    return GDRSTORE_OK;
  });
}

gdrstore_status Submit(gdrstore_stream* s, gdrstore::OpKind kind, const char* volume,
                       uint64_t offset, uint64_t n, gdrstore_buffer* buffer,
                       size_t buffer_offset, uint64_t tag) {
  if (s == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (volume == nullptr || buffer == nullptr) return Invalid(s, "volume and buffer are required");
  return Guard(s, [&] {
    {
      absl::MutexLock lock(&s->done_mu);
      ++s->outstanding;
    }
    s->stream->Submit(kind, gdrstore::Extent{volume, offset, n}, *buffer->buffer, buffer_offset,
                      [s, tag](absl::StatusOr<gdrstore::OpResult> r) {
                        gdrstore_completion c{};
                        c.tag = tag;
                        c.status = static_cast<gdrstore_status>(r.status().code());
                        if (r.ok()) {
                          c.bytes = r->bytes;
                          c.service_ns = r->service_ns;
                        } else {
                          CopyMessage(r.status(), c.message, sizeof(c.message));
                        }
                        absl::MutexLock lock(&s->done_mu);
                        s->done.push_back(c);
                        s->done_cv.SignalAll();
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

const char* gdrstore_error(const void* handle) {
  if (handle == nullptr) return "no handle";
  // Every handle type derives from CHandle alone, so the base sits at the handle's address.
  const auto* h = static_cast<const gdr::capi::CHandle*>(handle);
  absl::MutexLock lock(&h->mu);
  return h->error.c_str();
}

void gdrstore_client_options_init(gdrstore_client_options* o) {
  if (o == nullptr) return;
  std::memset(o, 0, sizeof(*o));
  o->struct_size = sizeof(*o);
  o->rpc_timeout_ms = 120000;
}

gdrstore_status gdrstore_client_open(const gdrstore_client_options* o, gdrstore_client** client,
                                     char* error, size_t error_len) {
  if (client == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  *client = nullptr;
  auto fail = [&](const absl::Status& s) {
    CopyMessage(s, error, error_len);
    return static_cast<gdrstore_status>(s.code());
  };
  try {
    absl::StatusOr<gdrstore::ClientOptions> opts = gdr::capi::ClientOptionsFromC(o);
    if (!opts.ok()) return fail(opts.status());
    absl::StatusOr<std::unique_ptr<gdrstore::Client>> c = gdrstore::Client::Connect(*opts);
    if (!c.ok()) return fail(c.status());
    auto* h = new gdrstore_client();
    h->client = std::move(*c);
    *client = h;
    return GDRSTORE_OK;
  } catch (const std::exception& e) {
    return fail(absl::InternalError(absl::StrCat("unexpected C++ exception: ", e.what())));
  }
}

void gdrstore_client_close(gdrstore_client* client) { delete client; }

gdrstore_status gdrstore_info_json(gdrstore_client* c, char** json) {
  if (c == nullptr || json == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return Guard(c, [&] {
    absl::StatusOr<gdrstore::v1::GetInfoResponse> info = c->client->GetInfo();
    if (!info.ok()) return c->Fail(info.status());
    return Json(c, *info, json);
  });
}

gdrstore_status gdrstore_stats_json(gdrstore_client* c, char** json) {
  if (c == nullptr || json == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return Guard(c, [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    gdrstore::v1::GetStatsResponse stats;
    grpc::Status s = c->client->stub()->GetStats(&ctx, gdrstore::v1::GetStatsRequest(), &stats);
    if (!s.ok()) return c->Fail(gdrstore::FromGrpcStatus(s));
    return Json(c, stats, json);
  });
}

void gdrstore_free(void* p) { std::free(p); }

gdrstore_status gdrstore_register_host(gdrstore_client* c, void* p, size_t n,
                                       gdrstore_buffer** out) {
  if (c == nullptr || out == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return Guard(c, [&] { return WrapBuffer(c, c->client->RegisterHostMemory(p, n), out); });
}

gdrstore_status gdrstore_register_gpu(gdrstore_client* c, uint64_t device_ptr, size_t n,
                                      gdrstore_buffer** out) {
  if (c == nullptr || out == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return Guard(c, [&] { return WrapBuffer(c, c->client->RegisterGpuMemory(device_ptr, n), out); });
}

gdrstore_status gdrstore_alloc_host(gdrstore_client* c, size_t n, gdrstore_buffer** out) {
  if (c == nullptr || out == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return Guard(c, [&] { return WrapBuffer(c, c->client->AllocateBuffer(n), out); });
}

gdrstore_status gdrstore_alloc_gpu(gdrstore_client* c, const char* gpu, size_t n,
                                   gdrstore_buffer** out) {
  if (c == nullptr || out == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (gpu == nullptr) return Invalid(c, "gpu is required (PCI address or CUDA ordinal)");
  return Guard(c, [&] { return WrapBuffer(c, c->client->AllocateGpuBuffer(gpu, n), out); });
}

void gdrstore_buffer_release(gdrstore_buffer* buffer) { delete buffer; }

void gdrstore_buffer_get_info(const gdrstore_buffer* b, gdrstore_buffer_info* info) {
  if (b == nullptr || info == nullptr) return;
  info->host = b->buffer->data();
  info->address = b->buffer->address();
  info->size = b->buffer->size();
  info->gpu_ordinal = b->buffer->gpu_ordinal();
  info->writable = b->buffer->writable() ? 1 : 0;
}

gdrstore_status gdrstore_buffer_copy_in(gdrstore_buffer* b, size_t offset, const void* src,
                                        size_t n) {
  if (b == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return Guard(b, [&] { return b->Done(b->buffer->CopyIn(offset, src, n)); });
}

gdrstore_status gdrstore_buffer_copy_out(gdrstore_buffer* b, size_t offset, void* dst,
                                         size_t n) {
  if (b == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return Guard(b, [&] { return b->Done(b->buffer->CopyOut(offset, dst, n)); });
}

gdrstore_status gdrstore_verify(gdrstore_buffer* b, size_t offset, size_t n, const char* volume,
                                uint64_t volume_offset, uint64_t* first_bad) {
  if (b == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (volume == nullptr) return Invalid(b, "volume is required");
  return Guard(b, [&] {
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
  if ((data == nullptr && n > 0) || volume == nullptr) return GDRSTORE_INVALID_ARGUMENT;
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

gdrstore_status gdrstore_stream_open(gdrstore_client* c, gdrstore_stream** out) {
  if (c == nullptr || out == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return Guard(c, [&] {
    absl::StatusOr<std::unique_ptr<gdrstore::OpStream>> s = c->client->OpenStream();
    if (!s.ok()) return c->Fail(s.status());
    auto* h = new gdrstore_stream();
    h->stream = std::move(*s);
    *out = h;
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

gdrstore_status gdrstore_poll(gdrstore_stream* s, gdrstore_completion* completions, size_t max,
                              int timeout_ms, size_t* count) {
  if (s == nullptr || count == nullptr || (completions == nullptr && max > 0)) {
    return GDRSTORE_INVALID_ARGUMENT;
  }
  *count = 0;
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

size_t gdrstore_stream_outstanding(const gdrstore_stream* s) {
  if (s == nullptr) return 0;
  absl::MutexLock lock(&const_cast<gdrstore_stream*>(s)->done_mu);
  return s->outstanding;
}

gdrstore_status gdrstore_stream_close(gdrstore_stream* s) {
  if (s == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  const gdrstore_status st = Guard(s, [&] { return s->Done(s->stream->Close()); });
  delete s;
  return st;
}

}  // extern "C"
