// `gdrctl bench`: a loop of ops keeping --qd in flight; GB/s and latency percentiles, with a
// live progress line on a terminal. On a cluster target, the loop runs over a cluster volume.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/gdrctl/bench.h"
#include "client/gdrctl/bench_progress.h"
#include "client/gdrctl/client_rails.h"
#include "client/gdrctl/cluster_ops.h"
#include "client/gdrctl/command.h"
#include "client/gdrctl/commands/op_args.h"
#include "client/gdrctl/size_flag.h"
#include "common/base/json.h"
#include "common/base/units.h"

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
    bench->add_flag("--unary", o_.unary, "one unary RPC per op instead of the Stream RPC");
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
    if (ctx.target.is_cluster()) return OnCluster(ctx);
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
    return ctx.target.WithClient(
        [&](gdrstore::Client& client) { return OnDaemon(client, o, progress, ctx.global); });
  }

 private:
  int OnCluster(const Context& ctx) const {
    return ctx.target.WithCluster([&](gdrstore::ClusterClient& cluster) {
      ClusterBenchArgs ba;
      ba.volume = o_.volume;
      ba.size = o_.size;
      ba.iterations = o_.iterations;
      ba.qd = o_.qd;
      if (type_ == "read" || type_ == "1") {
        ba.put = true;
      } else if (type_ != "write" && type_ != "0") {
        return Fail(kExitUsage, "bench -t must be write or read");
      }
      return ClusterBench(cluster, ba, ctx.global.json, std::cout);
    });
  }

  // Without --span, the loop cycles through up to 256 MiB of the volume.
  int OnDaemon(gdrstore::Client& client, BenchOptions o, bool progress,
               const GlobalOptions& global) const {
    if (span_opt_->count() == 0) {
      // Default: cycle through up to 256 MiB of the volume, within its size.
      auto info = client.GetVolumeInfo(o.volume, std::chrono::milliseconds(global.timeout_ms));
      if (!info.ok()) return Fail(info.status(), "GetInfo");
      uint64_t vol_size = 0;
      for (const auto& v : info->volumes())
        if (v.name() == o.volume) vol_size = v.size();
      if (vol_size == 0) {
        return Fail(kExitFailed, absl::StrCat("no volume '", o.volume,
                                              "' on the daemon (or none this token may use)"));
      }
      o.span = vol_size > o.offset ? std::min<uint64_t>(vol_size - o.offset, 256ull << 20) : 0;
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
      auto b = client.AllocateGpuBuffer(gpu_, slots * o.size);
      if (!b.ok()) return Fail(b.status(), "allocate --gpu");
      gpu_buffer = std::move(*b);
      o.buffer = gpu_buffer.get();
    }
    o.transport = gdrstore::TransportName(client.transport_info().kind);
    auto r = RunBench(client, o);
    if (o.progress) std::fprintf(stderr, "\r\x1b[K");
    if (!r.ok()) return Fail(r.status(), "bench");
    if (global.json) {
      gdr::json::Json doc = BenchResultJson(o, *r);
      if (gdr::json::Json rails = ClientRailsJson(client); !rails.empty()) {
        doc["rails"] = std::move(rails);
      }
      std::cout << gdr::json::Dump(doc) << "\n";
    } else {
      std::cout << absl::StrFormat(
          "%s %s x %u, qd %u over %s: %.3f GB/s, %.0f ops/s, latency us p50 %.1f p99 %.1f max "
          "%.1f; path %s\n",
          o.kind == gdrstore::OpKind::kWrite ? "write" : "read", gdr::FormatSize(o.size),
          o.iterations, o.qd, o.unary ? "unary" : "stream", r->gbps, r->ops_per_sec, r->p50_us,
          r->p99_us, r->max_us, r->path);
      std::cout << ClientRailsText(client);
    }
    return kExitOk;
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
