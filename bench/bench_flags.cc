// gdr_bench's command line (bench/bench_flags.h).
#include "bench/bench_flags.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/str_join.h"
#include "common/base/units.h"
#include "common/wire/stream_limits.h"
#include "gdrstore/types.h"

namespace gdrbench {

std::optional<int> ParseFlags(int argc, char** argv, Settings* s) {
  CLI::App app{"gdr_bench: starts gdrstored on loopback and measures the tcp transport and the "
               "RPC paths against baselines taken in the same run"};
  app.add_option("--daemon", s->daemon, "gdrstored binary to start")->capture_default_str();
  app.add_option("--daemon-flag", s->daemon_flags,
                 "extra flag for gdrstored, repeatable (e.g. --daemon-flag=--chunk-size=4MiB)");
  app.add_option("--repeats", s->repeats,
                 "measured repeats per line; the median is reported (scale: default 3)")
      ->capture_default_str()->check(CLI::Range(1, 100));
  app.add_option("--warmup", s->warmup, "unreported repeats before the measured ones")
      ->capture_default_str()->check(CLI::Range(0, 100));
  app.add_option("--bw-size", s->bw_size_text, "op size of the bandwidth lines")
      ->capture_default_str();
  app.add_option("--bw-ops", s->bw_ops, "ops per bandwidth measurement")
      ->capture_default_str()->check(CLI::Range(uint64_t{1}, uint64_t{1} << 20));
  app.add_option("--bw-qd", s->bw_qds, "queue depths of the bandwidth lines")
      ->capture_default_str()->check(CLI::Range(1u, 8u));
  app.add_option("--lat-ops", s->lat_ops, "ops per latency measurement")
      ->capture_default_str()->check(CLI::Range(uint64_t{10}, uint64_t{1} << 24));
  app.add_option("--rate-ops", s->rate_ops, "ops per ops/s measurement")
      ->capture_default_str()->check(CLI::Range(uint64_t{100}, uint64_t{1} << 24));
  app.add_option("--rate-qd", s->rate_qd, "queue depth of the ops/s line")
      ->capture_default_str()->check(CLI::Range(1u, 1024u));
  app.add_option("--stream-batch", s->stream_batches,
                 "also the rate line's Stream with at most N ops per request message, an info "
                 "line per N (repeatable; the rate line itself is the default, no cap)")
      ->check(CLI::Range(1, gdr::kMaxOpsPerMessage));
  app.add_option("--stream-calls", s->stream_calls,
                 "also the rate line's Stream spread over N calls, an info line per N "
                 "(repeatable; the rate line itself is the client's default, 4)")
      ->check(CLI::Range(1u, gdrstore::kMaxStreamCalls));
  app.add_option("--ready-timeout-ms", s->ready_timeout_ms, "how long to wait for the daemon")
      ->capture_default_str();
  app.add_option("--only", s->only,
                 "run only these groups: bw (a), lat (b), rate (c), gpu (d), reg (e), scale (f; "
                 "never part of the default run)")
      ->check(CLI::IsMember({"bw", "lat", "rate", "gpu", "reg", "scale"}));
  app.add_option("--gpu", s->gpu,
                 "GPU for group (d), tcp Writes into GPU memory, and for scale's 8-client GPU "
                 "line (PCI address or CUDA ordinal)");
  app.add_option("--gpu-slot", s->gpu_slot_text, "client staging slot size for GPU buffers")
      ->capture_default_str();
  app.add_option("--gpu-copies", s->gpu_copies, "cuMemcpyHtoD per baseline sample")
      ->capture_default_str()->check(CLI::Range(uint64_t{1}, uint64_t{1} << 16));
  app.add_flag("--json", s->json, "print one JSON document instead of the table");

  const unsigned nproc = std::thread::hardware_concurrency();
  ScaleSettings& sc = s->scale;
  std::string scale_clients = absl::StrJoin(DefaultScaleClients(nproc), ",");
  std::string scale_size = "16MiB", scale_many = "128,256";
  app.add_option("--scale-clients", scale_clients,
                 "scale: client process counts of the bulk and small-op lines (default: 1, 2, "
                 "4, 8, 16 up to nproc)")
      ->capture_default_str();
  app.add_option("--scale-size", scale_size, "scale: op size of the bulk lines")
      ->capture_default_str();
  app.add_option("--scale-ops", sc.ops, "scale: bulk ops per client")
      ->capture_default_str()->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24));
  app.add_option("--scale-qd", sc.qd, "scale: bulk ops in flight per client")
      ->capture_default_str()->check(CLI::Range(1u, 64u));
  app.add_option("--scale-stream-calls", sc.stream_calls,
                 "scale: each client's Stream calls (StreamOptions::calls; 0: the client's, 4)")
      ->capture_default_str()
      ->check(CLI::Range(0u, gdrstore::kMaxStreamCalls));
  app.add_option("--scale-small-ops", sc.small_ops, "scale: 4 KiB ops per client (qd 32)")
      ->capture_default_str()->check(CLI::Range(uint64_t{32}, uint64_t{1} << 26));
  app.add_option("--scale-many", scale_many,
                 "scale: client counts run against the default link pool beside 64 clients "
                 "(64 KiB Writes, qd 4); '' turns the lines off")
      ->capture_default_str();
  app.add_option("--scale-many-ops", sc.many_ops, "scale: 64 KiB ops per client of --scale-many")
      ->capture_default_str()->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24));
  app.add_option("--scale-plot", sc.plot,
                 "scale: PNG of GB/s against clients; its data goes beside it as .json")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<uint64_t> bw = gdr::ParseSize(s->bw_size_text);
  if (!bw.ok() || *bw == 0 || *bw > (1ull << 30)) {
    std::fprintf(stderr, "gdr_bench: --bw-size must be 1 B .. 1 GiB\n");
    return 2;
  }
  s->bw_size = *bw;
  absl::StatusOr<uint64_t> slot = gdr::ParseSize(s->gpu_slot_text);
  if (!slot.ok() || *slot < 4096 || *slot > (256ull << 20)) {
    std::fprintf(stderr, "gdr_bench: --gpu-slot must be 4 KiB .. 256 MiB\n");
    return 2;
  }
  s->gpu_slot = *slot;
  if (std::find(s->only.begin(), s->only.end(), "gpu") != s->only.end() && s->gpu.empty()) {
    std::fprintf(stderr, "gdr_bench: --only gpu needs --gpu PCI_ADDRESS|ORDINAL\n");
    return 2;
  }
  s->want_scale = std::find(s->only.begin(), s->only.end(), "scale") != s->only.end();
  if (s->want_scale) {
    absl::StatusOr<uint64_t> size = gdr::ParseSize(scale_size);
    if (!size.ok() || *size == 0 || *size > (1ull << 30)) {
      std::fprintf(stderr, "gdr_bench: --scale-size '%s' must be a size of 1 B .. 1 GiB\n",
                   scale_size.c_str());
      return 2;
    }
    sc.size = *size;
    absl::StatusOr<std::vector<uint32_t>> clients =
        ParseClientCounts(scale_clients, "--scale-clients", 1024);
    absl::StatusOr<std::vector<uint32_t>> many =
        ParseClientCounts(scale_many, "--scale-many", 1024);
    for (const absl::Status& st : {clients.status(), many.status()}) {
      if (!st.ok()) {
        std::fprintf(stderr, "gdr_bench: %s\n", std::string(st.message()).c_str());
        return 2;
      }
    }
    sc.clients = *std::move(clients);
    sc.many = *std::move(many);
    std::error_code ec;
    sc.self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec) {
      std::fprintf(stderr, "gdr_bench: cannot find this binary to start scale clients: %s\n",
                   ec.message().c_str());
      return 1;
    }
    sc.daemon = s->daemon;
    sc.daemon_flags = s->daemon_flags;
    sc.ready_timeout = std::chrono::milliseconds(s->ready_timeout_ms);
    sc.gpu = s->gpu;
    sc.gpu_slot = *slot;
    sc.repeats = app.count("--repeats") ? s->repeats : 3;
    sc.warmup = s->warmup;
    sc.quiet = s->json;
  }
  return std::nullopt;
}

}  // namespace gdrbench
