// One client process of gdr_bench's scale group: gdr_bench re-executed in a hidden mode
// (`gdr_bench --scale-client --key=value...`). It connects to the daemon over tcp, allocates
// and pre-faults its buffer, says "ready" on the report pipe, waits for the parent's start byte
// (so start-up is never timed), runs gdrctl::RunBench and reports one line: bytes, ops, its
// CLOCK_MONOTONIC start and end and the tcp links it had by then. Also the line format both
// sides of that pipe speak.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gdrstore/client.h"

namespace gdrbench {

// The first argument that selects the client mode.
inline constexpr char kScaleClientFlag[] = "--scale-client";
// Where the client finds its pipes: the start pipe's read end and the report pipe's write end.
inline constexpr int kStartFd = 3;
inline constexpr int kReportFd = 4;

// What one client runs. Every client of a run gets its own extents: [offset, offset + qd*size).
struct ScaleClientArgs {
  std::string daemon_address;  // HOST:PORT
  uint32_t index = 0;          // 0..N-1 within the run
  pid_t parent = 0;            // the client exits when this is no longer its parent
  gdrstore::OpKind kind = gdrstore::OpKind::kWrite;
  uint64_t size = 0;
  uint64_t ops = 0;
  uint32_t qd = 1;
  uint64_t offset = 0;
  std::string gpu;               // empty: host memory; else AllocateGpuBuffer's name for a GPU
  uint64_t gpu_slot = gdrstore::kGpuStagingSlotBytes;  // the tcp target's staging slot for GPU buffers
  uint32_t stream_calls = 0;     // the Stream's calls (StreamOptions::calls); 0: the default

  // The flags after kScaleClientFlag, each "--key=value".
  std::vector<std::string> ToFlags() const;
  // The inverse; INVALID_ARGUMENT naming the flag that is missing or bad.
  static absl::StatusOr<ScaleClientArgs> FromFlags(const std::vector<std::string>& flags);
};

// One line on the report pipe (kept under PIPE_BUF, so lines of many clients never interleave).
struct ClientReport {
  enum class Kind { kReady, kDone, kFailed };
  Kind kind = Kind::kFailed;
  uint32_t index = 0;
  pid_t pid = 0;
  // kDone
  uint64_t bytes = 0, ops = 0;
  int64_t start_ns = 0, end_ns = 0;  // CLOCK_MONOTONIC around the op loop
  uint32_t links = 0;  // the daemon's tcp links to this client when its ops had finished
  // Its target's staging copies into / out of GPU memory during the op loop: their GPU time,
  // and the time its link threads were blocked on them (TargetStats).
  uint64_t gpu_copy_ns = 0, gpu_wait_ns = 0;
  // kFailed: the status code's name (e.g. RESOURCE_EXHAUSTED) and its message
  std::string code, message;
};

// "ready I PID\n", "done I PID BYTES OPS START END LINKS COPY_NS WAIT_NS\n",
// "failed I PID CODE MESSAGE\n".
std::string FormatReport(const ClientReport& r);
// One line without its newline. INVALID_ARGUMENT when it is none of the three forms.
absl::StatusOr<ClientReport> ParseReport(absl::string_view line);

// Writes all of `bytes` to a pipe (retrying EINTR and short writes). Errno text on failure.
absl::Status WriteToPipe(int fd, absl::string_view bytes);

// The client process's main: argv[1] is kScaleClientFlag. Exit 0 after reporting "done",
// 1 after reporting "failed" (or when the parent went away), 2 on bad flags.
int RunScaleClient(int argc, char** argv);

}  // namespace gdrbench
