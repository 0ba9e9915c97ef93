// A GPU copy of store bytes that are not page-locked, through a copy thread's page-locked
// bounce slots, pipelined: while the GPU's copy engine moves one slot, the thread fills (or
// drains) the next. A file volume's bytes are read into a slot with pread rather than copied from
// a mapping that may not be faulted in yet (faster, measured: docs/architecture.md). The GPU side
// is a seam (StagedDevice), so the pipeline is tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "daemon/store/direction.h"

namespace gdr {

// The device side of staged copies: copies it starts and waits for by slot. Not thread-safe:
// one per copy thread.
class StagedDevice {
 public:
  virtual ~StagedDevice() = default;
  // Starts copying n bytes of `host` (a bounce slot, untouched until Wait(slot)) to `offset`
  // of the device memory; OUT_OF_RANGE outside it; the driver's error.
  virtual absl::Status StartToDevice(int slot, uint64_t offset, const std::byte* host,
                                     size_t n) = 0;
  // Starts copying n bytes at `offset` of the device memory into `host`.
  virtual absl::Status StartToHost(int slot, std::byte* host, uint64_t offset, size_t n) = 0;
  // Waits for `slot`'s copy (OK at once when none is pending): its error.
  virtual absl::Status Wait(int slot) = 0;
};

// Where a staged copy's store bytes are.
struct StoreBytes {
  std::byte* data = nullptr;  // the volume's mapping at the copy's first byte
  int fd = -1;                // a file volume's file (gets pread from it), else -1
  uint64_t file_offset = 0;   // of data[0] in the file
};

// Copies n bytes between `store` and `device` at `device_offset` in `direction` through
// `slots` (each `slot_bytes`, page-locked; at least one). Returns once every copy it started
// has finished, whatever the outcome. A store page past its file's end (the file cut short)
// ends it with DATA_LOSS naming the volume (mapping_guard.h); the device's error otherwise.
absl::Status StagedCopy(StagedDevice& device, uint64_t device_offset, const StoreBytes& store,
                        uint64_t n, Direction direction, std::span<std::byte* const> slots,
                        size_t slot_bytes);

}  // namespace gdr
