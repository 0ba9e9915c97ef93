// What `gdrctl write` and `gdrctl read` share: their options (volume, offset, size, buffer
// offset, salt, --verify, --gpu) and the buffer in host or GPU memory, from whichever Store the
// target is (a daemon or a cluster).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/gdrctl/command.h"
#include "gdrstore/client.h"
#include "gdrstore/store.h"

namespace gdrctl {

struct OpArgs {
  std::string volume = "vol0";
  uint64_t offset = 0;
  uint64_t size = 4096;
  uint64_t buffer_offset = 0;
  bool verify = false;
  uint64_t salt = 0;
  std::string gpu;    // empty: host memory
  bool sync = false;  // read: answered only after msync to a file-backed volume
};

// Adds the options both commands take to `cmd`, bound to `*a`.
void AddOpArgs(CLI::App* cmd, OpArgs* a);

// INVALID_ARGUMENT "--gpu: ..." when --gpu names no GPU in a form gdrctl takes.
absl::Status CheckGpuFlag(const std::string& gpu);

// Host memory, or device memory on `gpu`. Errors name the GPU and what is missing.
absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> Allocate(gdrstore::Store& store,
                                                           const std::string& gpu, size_t bytes);

// [offset, offset+n) of `buffer` as host bytes (a copy back from the GPU for device memory).
absl::StatusOr<std::vector<std::byte>> ReadBack(const gdrstore::Buffer& buffer, size_t offset,
                                                size_t n);

// "verify failed at volume offset N: got 0x.., want 0x.." for byte `at` of `data`.
std::string MismatchText(const std::byte* data, uint64_t seed, uint64_t offset, size_t at);

// "GPU 0 (0000:b7:00.0)" or "buffer".
std::string BufferPlace(const gdrstore::Buffer& buffer);

}  // namespace gdrctl
