#include "client/gdrctl/cluster_ops.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/gdrctl/command.h"
#include "common/base/json.h"
#include "common/base/pattern.h"
#include "common/base/units.h"

namespace gdrctl {

namespace {

using gdr::json::Json;

}  // namespace

int ClusterBench(gdrstore::ClusterClient& c, const ClusterBenchArgs& a, bool json,
                 std::ostream& out) {
  absl::StatusOr<gdrstore::v1::ClusterVolume> layout = c.Layout(a.volume);
  if (!layout.ok()) return Fail(layout.status(), "cluster bench");
  if (a.size == 0 || a.size > layout->size() || a.qd == 0) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("size ", a.size, " must be in 1..",
                                                        layout->size(), " and qd >= 1")),
                "cluster bench");
  }
  std::vector<std::unique_ptr<gdrstore::ClusterBuffer>> bufs;
  for (uint32_t i = 0; i < a.qd; ++i) {
    auto b = c.AllocateBuffer(a.size);
    if (!b.ok()) return Fail(b.status(), "buffer");
    bufs.push_back(std::move(*b));
  }
  const uint64_t slots = layout->size() / a.size;
  // One untimed op per buffer first: members connected, links opened, buffers registered with
  // each member, so the figure is the steady state.
  for (uint32_t w = 0; w < a.qd; ++w) {
    const uint64_t offset = (w % slots) * a.size;
    absl::Status st = a.put ? c.Put(a.volume, offset, a.size, *bufs[w])
                            : c.Get(a.volume, offset, a.size, *bufs[w]);
    if (!st.ok()) return Fail(st, "cluster bench (warm-up)");
  }
  std::map<std::string, uint64_t> before;
  for (const auto& m : c.Members()) before[m.entry.id()] = m.bytes;
  std::atomic<uint64_t> next{0}, failed{0};
  absl::Status first_error;
  std::mutex mu;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (uint32_t w = 0; w < a.qd; ++w) {
    workers.emplace_back([&, w] {
      for (uint64_t i = next++; i < a.iterations; i = next++) {
        const uint64_t offset = (i % slots) * a.size;
        absl::Status st = a.put ? c.Put(a.volume, offset, a.size, *bufs[w])
                                : c.Get(a.volume, offset, a.size, *bufs[w]);
        if (!st.ok()) {
          failed.fetch_add(1);
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.ok()) first_error = st;
        }
      }
    });
  }
  for (auto& t : workers) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t bytes = (a.iterations - failed.load()) * a.size;
  const double gbps = s > 0 ? double(bytes) / s / 1e9 : 0;
  std::vector<std::pair<std::string, uint64_t>> per;
  for (const auto& m : c.Members()) {
    per.emplace_back(m.entry.id(), m.bytes - before[m.entry.id()]);
  }
  if (json) {
    Json ms = Json::array();
    for (const auto& [id, b] : per) ms.push_back({{"id", id}, {"bytes", b}});
    const Json doc = {{"op", a.put ? "put" : "get"},
                      {"size", a.size},
                      {"iterations", a.iterations},
                      {"qd", a.qd},
                      {"failed", failed.load()},
                      {"seconds", s},
                      {"gb_per_s", gbps},
                      {"members", std::move(ms)}};
    out << gdr::json::Dump(doc) << "\n";
  } else {
    out << absl::StrFormat("cluster %s %s x %u, qd %u: %.3f GB/s (%.3f s)%s\n",
                           a.put ? "put" : "get", gdr::FormatSize(a.size), a.iterations, a.qd, gbps,
                           s, failed.load() ? absl::StrCat(", ", failed.load(), " failed") : "");
    for (const auto& [id, b] : per) {
      out << absl::StrFormat("  member %-16s %10s  %5.1f%%\n", id, gdr::FormatSize(b),
                             bytes ? 100.0 * double(b) / double(bytes) : 0.0);
    }
  }
  if (!first_error.ok()) return Fail(first_error, "cluster bench");
  return kExitOk;
}

}  // namespace gdrctl
