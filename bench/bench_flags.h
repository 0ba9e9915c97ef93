// gdr_bench's settings and its command line: every flag, its range, and the sizes and client
// lists checked before anything starts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/scale.h"
#include "common/base/units.h"
#include "gdrstore/types.h"

#ifndef GDR_BENCH_DAEMON_PATH
#define GDR_BENCH_DAEMON_PATH "gdrstored"
#endif

namespace gdrbench {

struct Settings {
  std::string daemon = GDR_BENCH_DAEMON_PATH;
  std::vector<std::string> daemon_flags;  // extra flags for the child, e.g. --chunk-size=4MiB
  int repeats = 5;
  int warmup = 1;
  std::string bw_size_text = "64MiB";
  uint64_t bw_size = 64 << 20;
  uint64_t bw_ops = 8;            // 64 MiB ops per bandwidth measurement
  std::vector<uint32_t> bw_qds = {1, 2};
  uint64_t lat_ops = 2000;        // 4 KiB unary ops / pings per latency measurement
  uint64_t rate_ops = 20000;      // 4 KiB ops per ops/s measurement
  uint32_t rate_qd = 32;
  // Info lines beside the rate line: its Stream with at most N ops per request message
  // (gdrctl::BenchOptions::stream_batch), one line per N.
  std::vector<uint32_t> stream_batches;
  // Info lines beside the rate line: its Stream over N calls (gdrctl::BenchOptions::
  // stream_calls; the rate line itself is the client's default), one line per N.
  std::vector<uint32_t> stream_calls;
  int64_t ready_timeout_ms = 20000;
  std::vector<std::string> only;  // of {bw, lat, rate, gpu, reg, scale}; empty = all but scale
  std::string gpu;                // GPU for the gpu group (PCI address or ordinal); empty = none
  uint64_t gpu_copies = 16;       // cuMemcpyHtoD of bw_size per baseline sample
  // The client's staging slot size; ClientOptions' default.
  std::string gpu_slot_text = gdr::FormatSize(gdrstore::kGpuStagingSlotBytes);
  bool json = false;
  uint64_t gpu_slot = gdrstore::kGpuStagingSlotBytes;  // gpu_slot_text, parsed
  bool want_scale = false;      // --only scale
  ScaleSettings scale;          // the scale group's, when want_scale
  bool Wants(const std::string& group) const {
    if (group == "gpu" && gpu.empty()) return false;
    return only.empty() || std::find(only.begin(), only.end(), group) != only.end();
  }
};

// Parses gdr_bench's command line into *s. Returns the exit status when the process is to end
// here (--help, a bad flag or value, named on stderr), nullopt when the run goes on.
std::optional<int> ParseFlags(int argc, char** argv, Settings* s);

}  // namespace gdrbench
