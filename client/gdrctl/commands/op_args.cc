#include "client/gdrctl/commands/op_args.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/gdrctl/size_flag.h"
#include "common/base/pattern.h"
#include "common/base/status_macros.h"
#include "common/cuda/gpu_select.h"

namespace gdrctl {

void AddOpArgs(CLI::App* cmd, OpArgs* a) {
  cmd->add_option("--volume", a->volume, "volume name")->capture_default_str();
  AddSizeOption(cmd, "-o,--offset", &a->offset, "byte offset in the volume (e.g. 1MiB)");
  AddSizeOption(cmd, "-s,--size", &a->size, "bytes to move (e.g. 4096, 64KiB, 1MiB)");
  AddSizeOption(cmd, "--buffer-offset", &a->buffer_offset,
                "start this many bytes into the registered buffer (unaligned tests)");
  cmd->add_option("--salt", a->salt, "pattern variant: 0 is the volume's initial fill");
  cmd->add_flag("--verify", a->verify, "check the moved bytes against the pattern");
  cmd->add_option("--gpu", a->gpu,
                  "use device memory on this GPU: PCI address (0000:b7:00.0 or b7:00.0) or CUDA "
                  "ordinal");
}

absl::Status CheckGpuFlag(const std::string& gpu) {
  if (gpu.empty()) return absl::OkStatus();
  if (absl::Status s = gdr::cuda::ValidateGpuSpec(gpu); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--gpu: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<gdrstore::Buffer>> Allocate(gdrstore::Store& store,
                                                           const std::string& gpu, size_t bytes) {
  if (gpu.empty()) return store.AllocateBuffer(bytes);
  return store.AllocateGpuBuffer(gpu, bytes);
}

absl::StatusOr<std::vector<std::byte>> ReadBack(const gdrstore::Buffer& buffer, size_t offset,
                                                size_t n) {
  std::vector<std::byte> out(n);
  GDR_RETURN_IF_ERROR(buffer.CopyOut(offset, out.data(), n));
  return out;
}

std::string MismatchText(const std::byte* data, uint64_t seed, uint64_t offset, size_t at) {
  return absl::StrFormat("verify failed at volume offset %u: got 0x%02x, want 0x%02x", offset + at,
                         static_cast<unsigned>(data[at]),
                         static_cast<unsigned>(gdr::PatternByte(seed, offset + at)));
}

std::string BufferPlace(const gdrstore::Buffer& buffer) {
  return buffer.on_gpu() ? absl::StrCat("GPU ", buffer.gpu_ordinal(), " (", buffer.gpu_pci(), ")")
                         : "buffer";
}

}  // namespace gdrctl
