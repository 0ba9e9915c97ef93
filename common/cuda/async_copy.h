// Host <-> device copies a thread starts now and waits for later, by slot: a copy thread fills
// (or drains) one page-locked buffer while the GPU's copy engine moves another (the local
// transport's staged copies). No CUDA in this header; without the toolkit every call answers
// FAILED_PRECONDITION (async_copy_stub.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/status.h"

namespace gdr::cuda {

// Copies on the calling thread's per-thread stream of the GPU's primary context, each followed
// by an event of its slot. Not thread-safe: one per thread, used on that thread only (the
// destructor may run elsewhere).
class AsyncCopier {
 public:
  explicit AsyncCopier(int slots);
  ~AsyncCopier();  // waits for the copies in flight, then destroys its events
  AsyncCopier(const AsyncCopier&) = delete;
  AsyncCopier& operator=(const AsyncCopier&) = delete;

  // Starts copying n bytes from `host` (page-locked, and left alone until Wait(slot)) to device
  // address `dptr` on GPU `ordinal`. INVALID_ARGUMENT for a slot out of range or one whose
  // copy was not waited for; the driver's error.
  absl::Status StartToDevice(int slot, int ordinal, uint64_t dptr, const void* host, size_t n);
  // Starts copying n bytes at device address `dptr` on GPU `ordinal` into `host`.
  absl::Status StartToHost(int slot, int ordinal, void* host, uint64_t dptr, size_t n);
  // Waits for `slot`'s copy: OK at once when none is pending; the copy's error.
  absl::Status Wait(int slot);

 private:
  struct Slot {
    int ordinal = -1;  // of the pending copy's GPU
    bool pending = false;
  };
  absl::Status Start(int slot, int ordinal, bool to_device, uint64_t dptr, void* host, size_t n);
  std::vector<Slot> slots_;
  // Per GPU ordinal, one event per slot (CUevent; events belong to a context), made on first use.
  std::map<int, std::vector<void*>> events_;
};

}  // namespace gdr::cuda
