// gdrstored --trace: records every op the service answers into a trace file
// (common/wire/trace_format.h) without putting file I/O on the op's path: ops are queued under a
// short critical section and a writer thread encodes and writes them. The op pipeline's trace
// stage (daemon/service/op_stages.h) fills each op's entry.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/wire/trace_format.h"

namespace gdr {

class TraceRecorder {
 public:
  // Ops queued and not yet written beyond this are dropped (and counted): a writer that cannot
  // keep up must not grow the daemon's memory.
  static constexpr size_t kMaxQueued = 1 << 18;
  // The writer wakes when this many ops are queued, else every 100 ms: few wake-ups under
  // load, and a file at most that stale while the daemon runs.
  static constexpr size_t kWakeBatch = 4096;

  // Creates `path` (truncating it), writes the header and starts the writer thread. Recording
  // stops, counting what it drops, once the file would pass `max_bytes`. The file's errors.
  static absl::StatusOr<std::unique_ptr<TraceRecorder>> Create(std::string path,
                                                               uint64_t max_bytes);
  ~TraceRecorder();  // Close()
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // Queues one op. Thread-safe; never waits for I/O.
  void Record(trace::OpEvent e);
  // Log rotation (SIGHUP): the ops queued so far go to the open file, which is then closed, and
  // a new trace (header, names defined afresh) is started at the same path, with the size cap
  // counted anew. Asynchronous; a file that cannot be created is logged and ops are dropped
  // until the next reopen.
  void Reopen();
  // Writes what is queued, flushes, closes the file and stops the thread. Idempotent; ops
  // recorded afterwards are dropped.
  void Close();

  struct Stats {
    uint64_t records = 0;  // written, over every file since start
    uint64_t dropped = 0;  // not written: cap reached, queue full, write error, after Close
    uint64_t bytes = 0;    // of the current file
    std::string file;
  };
  Stats stats() const;

 private:
  TraceRecorder(std::string path, uint64_t max_bytes,
                std::unique_ptr<trace::TraceFileWriter> writer);
  void Run();
  // Writes `batch` to the current file and folds its counters into the totals.
  void Write(std::vector<trace::OpEvent>& batch);
  void OpenNext();

  const std::string path_;
  const uint64_t max_bytes_;
  // Touched by the writer thread only (and by Create/Close around it).
  std::unique_ptr<trace::TraceFileWriter> writer_;
  bool logged_stop_ = false;

  mutable absl::Mutex mu_;
  std::vector<trace::OpEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool reopen_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar wake_;  // signalled at kWakeBatch queued ops, on Reopen and on Close
  std::atomic<uint64_t> records_{0};
  std::atomic<uint64_t> dropped_{0};  // queue-side drops plus the writers' drops
  std::atomic<uint64_t> bytes_{0};
  std::thread thread_;
};

}  // namespace gdr
