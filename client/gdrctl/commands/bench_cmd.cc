// `gdrctl bench`: a loop of ops keeping --qd in flight; GB/s and latency percentiles, with a
// live progress line on a terminal. The loop runs on the target's Store: a daemon, or a cluster
// volume (each member's share printed too).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/gdrctl/bench.h"
#include "client/gdrctl/bench_progress.h"
#include "client/gdrctl/client_rails.h"
#include "client/gdrctl/command.h"
#include "client/gdrctl/commands/op_args.h"
#include "client/gdrctl/size_flag.h"
#include "common/base/json.h"
#include "common/base/units.h"
#include "common/wire/stream_limits.h"
#include "gdrstore/cluster.h"
#include "gdrstore/store.h"

namespace gdrctl {
namespace {

class BenchCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* bench = app.add_subcommand("bench", "loop of ops: GB/s and latency percentiles");
    bench->add_option("-n,--iterations", o_.iterations, "ops to run")->capture_default_str();
    AddSizeOption(bench, "-s,--size", &o_.size, "bytes per op (e.g. 4KiB, 16MiB)");
    bench->add_option("-t,--type", type_, "write|read (or 0|1)")->capture_default_str();
    bench->add_option("--qd", o_.qd, "ops in flight")->capture_default_str();
    CLI::Option* unary =
        bench->add_flag("--unary", o_.unary, "one unary RPC per op instead of the Stream RPC");
    bench
        ->add_option("--stream-batch", o_.stream_batch,
                     "at most this many ops per Stream request message, a group leaving as soon "
                     "as it is complete (0: no cap, the default)")
        ->capture_default_str()
        ->check(CLI::Range(0, gdr::kMaxOpsPerMessage))
        ->excludes(unary);
    bench
        ->add_option("--stream-calls", o_.stream_calls,
                     "Stream RPCs the ops are spread over (0: the client's, 4)")
        ->capture_default_str()
        ->check(CLI::Range(0u, gdrstore::kMaxStreamCalls))
        ->excludes(unary);
    bench->add_option("--volume", o_.volume, "volume name")->capture_default_str();
    AddSizeOption(bench, "-o,--offset", &o_.offset, "first offset (e.g. 512MiB)");
    span_opt_ = AddSizeOption(bench, "--span", &span_,
                              "cycle extents through this many bytes (default: up to 256MiB)");
    span_opt_->default_str("");
    bench->add_flag("-q,--quiet", quiet_,
                    "no live progress line (there is none either with --json or when stderr is "
                    "not a terminal)");
    bench->add_option("--gpu", gpu_, "use device memory on this GPU (PCI address or CUDA ordinal)");
    return bench;
  }

  int Run(const Context& ctx) override {
    if (absl::Status s = CheckGpuFlag(gpu_); !s.ok()) {
      return Fail(kExitUsage, std::string(s.message()));
    }
    // The live line is for a person watching: never with -q, never in JSON mode, never when
    // stderr goes to a file or a pipe.
    const bool progress = !quiet_ && !ctx.global.json && ::isatty(STDERR_FILENO) == 1;
    gdrctl::BenchOptions o = o_;
    if (type_ == "write" || type_ == "0") {
      o.kind = gdrstore::OpKind::kWrite;
    } else if (type_ == "read" || type_ == "1") {
      o.kind = gdrstore::OpKind::kRead;
    } else {
      return Fail(kExitUsage, absl::StrCat("-t must be write|read|0|1, not '", type_, "'"));
    }
    return ctx.target.WithStore([&](gdrstore::Store& store) {
      // One loop over the Store; what only one kind of target has is reported beside it: a
      // daemon's Stream RPC and rails, a cluster's members' shares.
      return Bench(store, dynamic_cast<gdrstore::Client*>(&store),
                   dynamic_cast<gdrstore::ClusterClient*>(&store), o, progress, ctx.global);
    });
  }

 private:
  // The size of volume `name` as the target shows it; 0 when it has none this caller may use.
  static absl::StatusOr<uint64_t> VolumeSize(gdrstore::Store& store, gdrstore::Client* client,
                                             const std::string& name,
                                             const GlobalOptions& global) {
    uint64_t size = 0;
    if (client != nullptr) {
      // A daemon is asked for that one volume only.
      auto info = client->GetVolumeInfo(name, std::chrono::milliseconds(global.timeout_ms));
      if (!info.ok()) return info.status();
      for (const auto& v : info->volumes())
        if (v.name() == name) size = v.size();
      return size;
    }
    auto volumes = store.ListVolumes();
    if (!volumes.ok()) return volumes.status();
    for (const gdrstore::StoreVolume& v : *volumes)
      if (v.name == name) size = v.size;
    return size;
  }

  // `client` is the Store when it is a daemon's Client, `cluster` when it is a cluster (one of
  // them is null). Without --span, the loop cycles through up to 256 MiB of the volume.
  int Bench(gdrstore::Store& store, gdrstore::Client* client, gdrstore::ClusterClient* cluster,
            BenchOptions o, bool progress, const GlobalOptions& global) const {
    if (span_opt_->count() == 0) {
      absl::StatusOr<uint64_t> vol_size = VolumeSize(store, client, o.volume, global);
      if (!vol_size.ok()) return Fail(vol_size.status(), "GetInfo");
      if (*vol_size == 0) {
        return Fail(kExitFailed,
                    absl::StrCat("no volume '", o.volume, "' on the ",
                                 cluster != nullptr ? "cluster" : "daemon",
                                 " (or none this token may use)"));
      }
      o.span = *vol_size > o.offset ? std::min<uint64_t>(*vol_size - o.offset, 256ull << 20) : 0;
    } else {
      o.span = span_;
    }
    BenchProgress meter(o.iterations, o.size);
    if (progress) {
      // One line, rewritten in place about once a second; cleared when the loop ends.
      o.progress = [&meter](uint64_t done, double secs) {
        std::fprintf(stderr, "\r%s\x1b[K", meter.Update(done, secs).c_str());
      };
    }
    std::unique_ptr<gdrstore::Buffer> gpu_buffer;
    if (!gpu_.empty()) {
      const uint64_t slots = std::max<uint64_t>(1, std::min<uint64_t>(o.qd, o.iterations));
      auto b = store.AllocateGpuBuffer(gpu_, slots * o.size);
      if (!b.ok()) return Fail(b.status(), "allocate --gpu");
      gpu_buffer = std::move(*b);
      o.buffer = gpu_buffer.get();
    }
    // Each member's share is what its byte count grew by during the loop.
    std::map<std::string, uint64_t> before;
    if (cluster != nullptr) {
      for (const auto& m : cluster->Members()) before[m.entry.id()] = m.bytes;
    }
    absl::StatusOr<BenchResult> r;
    if (client != nullptr) {
      o.transport = gdrstore::TransportName(client->transport_info().kind);
      r = RunBench(*client, o);
    } else {
      r = RunBench(store, nullptr, o);
    }
    if (o.progress) std::fprintf(stderr, "\r\x1b[K");
    if (!r.ok()) return Fail(r.status(), "bench");
    if (cluster != nullptr) {
      std::vector<std::pair<std::string, uint64_t>> shares;
      for (const auto& m : cluster->Members()) {
        shares.emplace_back(m.entry.id(), m.bytes - before[m.entry.id()]);
      }
      PrintCluster(o, *r, shares, global.json);
    } else {
      PrintDaemon(*client, o, *r, global.json);
    }
    return kExitOk;
  }

  // A put is a read on the wire (buffer -> store), a get a write.
  static void PrintCluster(const BenchOptions& o, const BenchResult& r,
                           const std::vector<std::pair<std::string, uint64_t>>& shares,
                           bool json) {
    const char* op = o.kind == gdrstore::OpKind::kWrite ? "get" : "put";
    if (json) {
      gdr::json::Json ms = gdr::json::Json::array();
      for (const auto& [id, b] : shares) ms.push_back({{"id", id}, {"bytes", b}});
      // "failed" stays for readers of the earlier output: the first failed op now ends the
      // bench with its error, so a result printed had none.
      const gdr::json::Json doc = {{"op", op},
                                   {"size", o.size},
                                   {"iterations", o.iterations},
                                   {"qd", o.qd},
                                   {"failed", 0},
                                   {"seconds", r.seconds},
                                   {"gb_per_s", r.gbps},
                                   {"members", std::move(ms)}};
      std::cout << gdr::json::Dump(doc) << "\n";
      return;
    }
    std::cout << absl::StrFormat("cluster %s %s x %u, qd %u: %.3f GB/s (%.3f s)\n", op,
                                 gdr::FormatSize(o.size), o.iterations, o.qd, r.gbps, r.seconds);
    for (const auto& [id, b] : shares) {
      std::cout << absl::StrFormat("  member %-16s %10s  %5.1f%%\n", id, gdr::FormatSize(b),
                                   r.bytes ? 100.0 * double(b) / double(r.bytes) : 0.0);
    }
  }

  static void PrintDaemon(gdrstore::Client& client, const BenchOptions& o, const BenchResult& r,
                          bool json) {
    if (json) {
      gdr::json::Json doc = BenchResultJson(o, r);
      if (gdr::json::Json rails = ClientRailsJson(client); !rails.empty()) {
        doc["rails"] = std::move(rails);
      }
      std::cout << gdr::json::Dump(doc) << "\n";
      return;
    }
    std::cout << absl::StrFormat(
        "%s %s x %u, qd %u over %s: %.3f GB/s, %.0f ops/s, latency us p50 %.1f p99 %.1f max "
        "%.1f; path %s\n",
        o.kind == gdrstore::OpKind::kWrite ? "write" : "read", gdr::FormatSize(o.size),
        o.iterations, o.qd, o.unary ? "unary" : "stream", r.gbps, r.ops_per_sec, r.p50_us,
        r.p99_us, r.max_us, r.path);
    std::cout << ClientRailsText(client);
  }

  BenchOptions o_;
  std::string type_ = "write";
  uint64_t span_ = 0;
  CLI::Option* span_opt_ = nullptr;
  bool quiet_ = false;
  std::string gpu_;
};

}  // namespace

std::unique_ptr<Command> NewBenchCommand() { return std::make_unique<BenchCommand>(); }

}  // namespace gdrctl
