#include "client/gdrctl/bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "client/src/stream_messages.h"

namespace gdrctl {

using gdrstore::OpKind;
using Clock = std::chrono::steady_clock;

absl::StatusOr<BenchResult> RunBench(gdrstore::Client& client, const BenchOptions& o) {
  if (o.unary) return RunBench(client, nullptr, o);
  gdrstore::StreamOptions so;
  so.calls = o.stream_calls;
  so.max_ops_per_message = o.stream_batch;
  auto stream = client.OpenStream(so);
  if (!stream.ok()) return stream.status();
  absl::StatusOr<BenchResult> r = RunBench(client, stream->get(), o);
  absl::Status closed = (*stream)->Close();
  if (r.ok() && !closed.ok()) return closed;
  return r;
}

absl::StatusOr<BenchResult> RunBench(gdrstore::Store& store, gdrstore::OpStream* stream,
                                     const BenchOptions& o) {
  if (o.size == 0) return absl::InvalidArgumentError("size must be > 0");
  if (o.qd == 0) return absl::InvalidArgumentError("qd must be >= 1");
  if (o.iterations == 0) return absl::InvalidArgumentError("iterations must be >= 1");
  const uint64_t slots = std::min<uint64_t>(o.qd, o.iterations);
  std::unique_ptr<gdrstore::Buffer> owned;
  const gdrstore::Buffer* buffer = o.buffer;
  if (buffer == nullptr) {
    auto allocated = store.AllocateBuffer(slots * o.size);
    if (!allocated.ok()) return allocated.status();
    owned = std::move(*allocated);
    buffer = owned.get();
  } else if (buffer->size() < slots * o.size) {
    return absl::InvalidArgumentError(absl::StrCat("buffer of ", buffer->size(),
                                                   " bytes is smaller than qd * size = ",
                                                   slots * o.size));
  }
  const uint64_t positions = o.span >= o.size ? o.span / o.size : 1;

  std::mutex mu;
  std::condition_variable cv;
  uint64_t submitted = 0, completed = 0, inflight = 0;
  absl::Status first_error;
  std::string path;
  std::vector<uint64_t> latency_ns(o.iterations);
  std::vector<uint64_t> service_ns(o.iterations);
  const uint64_t messages_before = gdr::StreamMessagesSoFar();
  const Clock::time_point t0 = Clock::now();

  // Submits op `i` into buffer slot `slot`; the completion reuses the slot for the next op.
  std::function<void(uint64_t, uint64_t)> submit = [&](uint64_t i, uint64_t slot) {
    gdrstore::Extent extent{o.volume, o.offset + (i % positions) * o.size, o.size};
    const Clock::time_point start = Clock::now();
    auto done = [&, i, slot, start](absl::StatusOr<gdrstore::OpResult> r) {
      latency_ns[i] =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
      if (r.ok()) service_ns[i] = r->service_ns;
      uint64_t next = UINT64_MAX;
      {
        std::lock_guard<std::mutex> lock(mu);
        ++completed;
        --inflight;
        if (!r.ok() && first_error.ok()) first_error = r.status();
        if (r.ok() && path.empty()) path = r->path;
        if (first_error.ok() && submitted < o.iterations) {
          next = submitted++;
          ++inflight;
        }
        if (inflight == 0) cv.notify_all();
      }
      if (next != UINT64_MAX) submit(next, slot);
    };
    if (stream != nullptr) {
      stream->Submit(o.kind, extent, *buffer, slot * o.size, std::move(done));
    } else {
      store.SubmitAsync(o.kind, extent, *buffer, slot * o.size, std::move(done), {});
    }
  };

  {
    std::lock_guard<std::mutex> lock(mu);
    submitted = slots;
    inflight = slots;
  }
  for (uint64_t s = 0; s < slots; ++s) submit(s, s);
  {
    std::unique_lock<std::mutex> lock(mu);
    while (inflight != 0) {
      cv.wait_for(lock, std::chrono::seconds(1));
      if (o.progress && inflight != 0) {
        const uint64_t done = completed;
        const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
        lock.unlock();
        o.progress(done, secs);
        lock.lock();
      }
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!first_error.ok()) return first_error;

  BenchResult r;
  r.ops = o.iterations;
  r.bytes = o.iterations * o.size;
  r.seconds = seconds;
  r.gbps = static_cast<double>(r.bytes) / seconds / 1e9;
  r.ops_per_sec = static_cast<double>(r.ops) / seconds;
  r.path = path;
  if (stream != nullptr) {
    r.stream_messages = gdr::StreamMessagesSoFar() - messages_before;
  }
  std::vector<uint64_t> sorted = latency_ns;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double p) {
    size_t idx = static_cast<size_t>(p * static_cast<double>(sorted.size() - 1) + 0.5);
    return static_cast<double>(sorted[idx]) / 1e3;
  };
  r.p50_us = pct(0.50);
  r.p99_us = pct(0.99);
  r.max_us = static_cast<double>(sorted.back()) / 1e3;
  double sum = 0;
  for (uint64_t v : sorted) sum += static_cast<double>(v);
  r.mean_us = sum / static_cast<double>(sorted.size()) / 1e3;
  sorted = std::move(service_ns);
  std::sort(sorted.begin(), sorted.end());
  r.service_p50_us = pct(0.50);
  return r;
}

gdr::json::Json BenchResultJson(const BenchOptions& o, const BenchResult& r) {
  using gdr::json::Fixed;
  gdr::json::Json doc = {{"op", o.kind == OpKind::kWrite ? "write" : "read"},
                         {"transport", o.transport},
                         {"rpc", o.unary ? "unary" : "stream"},
                         {"size", o.size},
                         {"qd", o.qd},
                         {"ops", r.ops},
                         {"bytes", r.bytes},
                         {"seconds", Fixed(r.seconds, 6)},
                         {"gbps", Fixed(r.gbps, 4)},
                         {"ops_per_sec", Fixed(r.ops_per_sec, 1)},
                         {"lat_us",
                          {{"p50", Fixed(r.p50_us, 1)},
                           {"p99", Fixed(r.p99_us, 1)},
                           {"max", Fixed(r.max_us, 1)},
                           {"mean", Fixed(r.mean_us, 1)}}},
                         {"path", r.path}};
  if (!o.unary) {
    doc["stream_batch"] = o.stream_batch;
    doc["stream_calls"] = o.stream_calls;
    doc["stream_messages"] = r.stream_messages;
  }
  return doc;
}

}  // namespace gdrctl
