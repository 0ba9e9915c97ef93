// gdr_bench's scale group (`--only scale`): N client processes against one daemon, each with
// its own store extents, for N = 1, 2, 4, ... up to nproc; Write and Read aggregates beside raw
// loopback TCP with as many streams as the N clients had links, measured in the same run, each
// N's share of it against one client's, small ops, many clients against the default link pool,
// and (with --gpu) clients writing into GPU memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gdrstore/types.h"

namespace gdrbench {

struct ScaleSettings {
  std::string daemon;                     // gdrstored binary
  std::vector<std::string> daemon_flags;  // extra daemon flags
  std::chrono::milliseconds ready_timeout{20000};
  std::string self;                       // this binary, re-executed as each client
  std::vector<uint32_t> clients;          // N of the bulk and small-op lines, ascending
  uint64_t size = 16 << 20;               // bulk op size
  uint64_t ops = 128;                     // bulk ops per client
  uint32_t qd = 2;                        // bulk ops in flight per client
  uint64_t small_ops = 20000;             // 4 KiB ops per client at qd 32
  std::vector<uint32_t> many;             // client counts against the pool; empty: none
  uint64_t many_ops = 256;                // 64 KiB ops per client at qd 4
  std::string gpu;                        // GPU of the 8-client GPU line; empty: none
  uint64_t gpu_slot = gdrstore::kGpuStagingSlotBytes;
  uint32_t stream_calls = 0;              // each client's Stream calls; 0: the client's default
  int repeats = 3;
  int warmup = 1;
  std::string plot = "scale.png";         // PNG path; the JSON beside it
  bool quiet = false;                     // no progress lines on stderr
};

// Clients in the default list: 1, 2, 4, 8, 16, those not above `nproc`.
std::vector<uint32_t> DefaultScaleClients(unsigned nproc);

// "1,2,4" -> {1,2,4} (ascending, no duplicates, each 1..limit); an empty text is an empty list.
// INVALID_ARGUMENT naming `flag` and the bad item.
absl::StatusOr<std::vector<uint32_t>> ParseClientCounts(absl::string_view text,
                                                         absl::string_view flag, uint32_t limit);

struct ScaleReport {
  std::string table;  // the text report
  std::string json;   // one JSON object (gdr_bench --json puts it under "scale")
  std::string plot_note;  // where the plot went, or why there is none and where its data is
  std::string daemon_command;
};

// Starts its own daemon (volume and max op size sized for the largest line), runs every line,
// stops the daemon, then writes the JSON beside s.plot and makes the plot (WriteScalePlot).
// The first failing client of a bulk, small-op or GPU line fails the group (ABORTED, naming
// it); failures in the many-client lines are counted and reported instead. A GPU that is not
// there skips the GPU line with the reason.
absl::StatusOr<ScaleReport> RunScale(const ScaleSettings& s);

}  // namespace gdrbench
