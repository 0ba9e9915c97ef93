// Moves bytes between a byte stream (a socket) and GPU memory through a ring of pinned host
// slots, pipelined: while slot k's copy runs on the GPU's copy engine, slot k+1 is filled from
// (or drained to) the stream. Device pointers are only ever handed to the driver's copy calls,
// never dereferenced on the host. One pipe per (thread, GPU); not thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gdr::cuda {

struct StagingStats {
  uint64_t bytes_to_device = 0;
  uint64_t bytes_from_device = 0;
  uint64_t copy_ns = 0;  // GPU time of the staging copies (CUDA events around each)
  uint64_t wait_ns = 0;  // host time blocked waiting for a copy to finish
};

class StagingPipe {
 public:
  // `slots` pinned buffers of `slot_bytes` each, a non-blocking stream on GPU `ordinal`.
  static absl::StatusOr<std::unique_ptr<StagingPipe>> Create(int ordinal, size_t slot_bytes,
                                                             int slots);
  ~StagingPipe();  // waits for copies in flight, then frees
  StagingPipe(const StagingPipe&) = delete;
  StagingPipe& operator=(const StagingPipe&) = delete;

  // What one transfer did: `io` is the stream side (fill/drain failed: the link is broken),
  // `gpu` the device side (a copy failed; the stream side was still consumed in full for
  // ToDevice, so the link stays framed).
  struct Result {
    absl::Status io;
    absl::Status gpu;
    bool sent_any = false;  // FromDevice: whether `before_first` ran
  };

  // Copies `length` bytes, supplied piece by piece by `fill(host, n)`, to device address
  // `dptr`. Returns once every piece is in the pipe; call Sync() before telling anyone the
  // bytes are there. The last pieces' copies may start only then, and a failed copy may show
  // only in Sync().
  Result ToDevice(uint64_t dptr, size_t length,
                  absl::FunctionRef<absl::Status(std::byte*, size_t)> fill);

  // Copies `length` bytes from `dptr` and hands them, in order, to `drain(host, n)`.
  // `before_first` runs once, after the first piece has reached host memory and before it is
  // drained (a response header goes there): when the first copy fails nothing has been sent.
  Result FromDevice(uint64_t dptr, size_t length, absl::FunctionRef<absl::Status()> before_first,
                    absl::FunctionRef<absl::Status(const std::byte*, size_t)> drain);

  // Waits for every copy in flight; the first failure among them.
  absl::Status Sync();

  // Whether copies are in flight (Sync() would wait).
  bool busy() const;

  int ordinal() const { return ordinal_; }
  const StagingStats& stats() const { return stats_; }

 private:
  struct Slot;
  StagingPipe(int ordinal, size_t slot_bytes);
  absl::Status Reclaim(Slot& slot);
  // Starts the copies of the oldest held slots until `keep` are left held.
  absl::Status IssueHeld(int keep);
  absl::Status Issue(Slot& slot, bool to_device, uint64_t dptr, size_t n);

  // How long a wait for a copy polls before it sleeps (see Reclaim).
  static constexpr std::chrono::microseconds kPollBeforeSleep{30};

  int ordinal_;
  size_t slot_bytes_;
  void* stream_ = nullptr;  // CUstream
  std::unique_ptr<Slot[]> slots_;
  int nslots_ = 0;
  int next_ = 0;
  // A filled slot's copy waits until this many newer slots were filled (half the ring): bytes
  // recv() just wrote sit dirty in the receiving core's cache, and the GPU's DMA reads them
  // at less than half the rate it reads memory the CPU left alone (bench/staging_copy_probe.py:
  // 1 MiB at 19.6 against 38.7 GB/s on an H200 host). The newer slots' bytes push them out.
  int lag_ = 0;
  int held_ = 0;  // filled slots whose copies have not started: the ones just behind next_
  StagingStats stats_;
};

}  // namespace gdr::cuda
