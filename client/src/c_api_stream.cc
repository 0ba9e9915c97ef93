// The C ABI's streams (gdrstore_stream_*, gdrstore_poll) on a client or a cluster handle. A
// client's ride one OpStream call; a cluster's go through Store::SubmitAsync, which splits each
// op over its members' streams. Either way answers are queued here until gdrstore_poll collects
// them: no callback ever runs on the caller's threads.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/src/c_api_store.h"
#include "gdrstore/client.h"
#include "gdrstore/gdrstore.h"

namespace gdr::capi {

struct StreamHandle : CHandle {
  static constexpr Kind kKind = Kind::kStream;
  StreamHandle() : CHandle(kKind) {}
  std::unique_ptr<gdrstore::OpStream> stream;  // a client's: one Stream call
  // A cluster's: its ops go through the store, which the stream keeps alive until it closes
  // (a cluster handle closed first refuses new ops through `owner->closed`).
  std::shared_ptr<StoreHandle> store;
  std::shared_ptr<StoreLife> owner;
  absl::Mutex done_mu;
  absl::CondVar done_cv;
  std::deque<gdrstore_completion> done ABSL_GUARDED_BY(done_mu);
  size_t outstanding ABSL_GUARDED_BY(done_mu) = 0;  // submitted, not yet polled
  size_t in_flight ABSL_GUARDED_BY(done_mu) = 0;    // submitted, not yet answered

  // Every op answered (each within its deadline); the call's status for a client's stream.
  absl::Status Drain() {
    if (stream != nullptr) return stream->Close();
    absl::MutexLock lock(&done_mu);
    done_mu.Await(absl::Condition(
        +[](size_t* n) { return *n == 0; }, &in_flight));
    return absl::OkStatus();
  }
};

void EndStreams(StoreLife& life) {
  std::vector<std::shared_ptr<StreamHandle>> streams;
  {
    absl::MutexLock lock(&life.mu);
    life.closed.store(true);  // from here its streams take no op, and open none
    for (const std::weak_ptr<StreamHandle>& w : life.streams) {
      if (std::shared_ptr<StreamHandle> s = w.lock()) streams.push_back(std::move(s));
    }
    life.streams.clear();
  }
  for (const std::shared_ptr<StreamHandle>& s : streams) {
    try {
      (void)s->Drain();
    } catch (...) {
      // Nothing crosses the C boundary; gdrstore_stream_close reports the call's end.
    }
  }
}

namespace {

// FAILED_PRECONDITION when the stream's client or cluster has been closed.
absl::Status StoreOpen(const StreamHandle& s) {
  if (!s.owner->closed.load()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "stream %#x belongs to %s, which was closed: only gdrstore_poll, "
      "gdrstore_stream_outstanding and gdrstore_stream_close work on it",
      s.id, s.owner->Name()));
}

gdrstore_completion Completion(uint64_t tag, const absl::StatusOr<gdrstore::OpResult>& r) {
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
  return c;
}

gdrstore_status Submit(gdrstore_stream* stream, gdrstore::OpKind kind, const char* volume,
                       uint64_t offset, uint64_t n, gdrstore_buffer* buffer,
                       size_t buffer_offset, uint64_t tag) {
  std::shared_ptr<StreamHandle> s = Self<StreamHandle>(stream);
  if (s == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (volume == nullptr) return Invalid(*s, "volume is NULL");
  if (absl::Status st = StoreOpen(*s); !st.ok()) return s->Fail(st);
  absl::StatusOr<std::shared_ptr<BufferHandle>> b = FindAs<BufferHandle>(buffer, "buffer");
  if (!b.ok()) return s->Fail(b.status());
  if (absl::Status st = SameStore(
          **b, *s->owner, absl::StrFormat("%s of stream %#x", s->owner->Name(), s->id));
      !st.ok()) {
    return s->Fail(st);
  }
  return Guard(*s, [&] {
    {
      absl::MutexLock lock(&s->done_mu);
      ++s->outstanding;
      ++s->in_flight;
    }
    // The callback may outlive this call but not the stream: gdrstore_stream_close waits for
    // every op to be answered before the last reference to the handle goes.
    StreamHandle* raw = s.get();
    auto answered = [raw, tag](absl::StatusOr<gdrstore::OpResult> r) {
      const gdrstore_completion c = Completion(tag, r);
      absl::MutexLock lock(&raw->done_mu);
      raw->done.push_back(c);
      --raw->in_flight;
      raw->done_cv.SignalAll();
    };
    const gdrstore::Extent extent{volume, offset, n};
    const gdrstore::Buffer& mem = *(*b)->buffer;
    if (s->stream != nullptr) {
      s->stream->Submit(kind, extent, mem, buffer_offset, std::move(answered));
    } else {
      s->store->store().SubmitAsync(kind, extent, mem, buffer_offset, std::move(answered), {});
    }
    return GDRSTORE_OK;
  });
}

}  // namespace
}  // namespace gdr::capi

namespace capi = gdr::capi;

extern "C" {

gdrstore_status gdrstore_stream_open(gdrstore_client* handle, gdrstore_stream** out) {
  std::shared_ptr<capi::StoreHandle> c = capi::SelfStore(handle);
  if (c == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (out == nullptr) return capi::Invalid(*c, "stream (the out pointer) is NULL");
  return capi::Guard(*c, [&] {
    auto h = std::make_shared<capi::StreamHandle>();
    h->owner = c->life;
    if (c->kind == capi::Kind::kClient) {
      absl::StatusOr<gdrstore::Client*> client = c->store().RegisteringClient();
      if (!client.ok()) return c->Fail(client.status());
      absl::StatusOr<std::unique_ptr<gdrstore::OpStream>> s = (*client)->OpenStream();
      if (!s.ok()) return c->Fail(s.status());
      h->stream = std::move(*s);
    } else {
      h->store = c;
    }
    {
      // Listed for the store's close, unless that has begun on another thread.
      absl::MutexLock lock(&c->life->mu);
      if (c->life->closed.load()) {
        return c->Fail(absl::FailedPreconditionError(
            absl::StrCat(c->life->Name(), " was closed")));
      }
      std::vector<std::weak_ptr<capi::StreamHandle>>& list = c->life->streams;
      list.erase(std::remove_if(list.begin(), list.end(),
                                [](const auto& w) { return w.expired(); }),
                 list.end());
      list.push_back(h);
    }
    *out = capi::AsC<gdrstore_stream>(capi::Register(std::move(h)));
    return GDRSTORE_OK;
  });
}

gdrstore_status gdrstore_stream_get(gdrstore_stream* s, const char* volume, uint64_t offset,
                                    uint64_t n, gdrstore_buffer* buffer, size_t buffer_offset,
                                    uint64_t tag) {
  return capi::Submit(s, gdrstore::OpKind::kWrite, volume, offset, n, buffer, buffer_offset, tag);
}

gdrstore_status gdrstore_stream_put(gdrstore_stream* s, gdrstore_buffer* buffer,
                                    size_t buffer_offset, const char* volume, uint64_t offset,
                                    uint64_t n, uint64_t tag) {
  return capi::Submit(s, gdrstore::OpKind::kRead, volume, offset, n, buffer, buffer_offset, tag);
}

gdrstore_status gdrstore_poll(gdrstore_stream* stream, gdrstore_completion* completions,
                              size_t max, int timeout_ms, size_t* count) {
  std::shared_ptr<capi::StreamHandle> s = capi::Self<capi::StreamHandle>(stream);
  if (s == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  if (count == nullptr) return capi::Invalid(*s, "count (the out pointer) is NULL");
  *count = 0;
  if (max > SIZE_MAX / sizeof(gdrstore_completion)) {
    return capi::Invalid(*s, absl::StrCat("max ", max, " completions do not fit in memory"));
  }
  if (absl::Status st = capi::CheckMemory(completions, max * sizeof(gdrstore_completion),
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
  std::shared_ptr<capi::StreamHandle> s = capi::Self<capi::StreamHandle>(stream);
  if (s == nullptr) return 0;
  absl::MutexLock lock(&s->done_mu);
  return s->outstanding;
}

gdrstore_status gdrstore_stream_close(gdrstore_stream* stream) {
  // Out of the table first, so that no submission races the close; the failure (if any) stays
  // readable with gdrstore_error(stream) on this thread.
  std::shared_ptr<capi::StreamHandle> s = capi::Unregister<capi::StreamHandle>(stream);
  if (s == nullptr) return GDRSTORE_INVALID_ARGUMENT;
  return capi::Guard(*s, [&] { return s->Done(s->Drain()); });
}

}  // extern "C"
