// `gdrctl write`: the store writes its bytes into a buffer here (host or GPU memory): a daemon,
// or a cluster volume's members when the target is a cluster (one gdrstore::Store either way).
// --verify checks the buffer against the volume's pattern (valid while the extent holds the
// initial fill, or what a `read --salt N` put there: pass the same salt).
#include <iostream>

#include "absl/strings/str_format.h"
#include "client/gdrctl/commands/op_args.h"
#include "common/base/json.h"
#include "common/base/pattern.h"

namespace gdrctl {
namespace {

class WriteCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* cmd = app.add_subcommand("write", "daemon writes store bytes into a buffer here");
    AddOpArgs(cmd, &a_);
    return cmd;
  }

  int Run(const Context& ctx) override {
    if (absl::Status s = CheckGpuFlag(a_.gpu); !s.ok()) {
      return Fail(kExitUsage, std::string(s.message()));
    }
    return ctx.target.WithStore(
        [&](gdrstore::Store& store) { return Write(store, ctx.global.json); });
  }

 private:
  int Write(gdrstore::Store& store, bool json) const {
    const OpArgs& a = a_;
    const uint64_t size = a.size;
    auto buffer = Allocate(store, a.gpu, size + a.buffer_offset);
    if (!buffer.ok()) return Fail(buffer.status(), a.gpu.empty() ? "allocate" : "allocate --gpu");
    gdrstore::Extent extent{a.volume, a.offset, size};
    auto r = store.Submit(gdrstore::OpKind::kWrite, extent, **buffer, a.buffer_offset);
    if (!r.ok()) return Fail(r.status(), "write");
    std::string verdict;
    if (a.verify) {
      const uint64_t seed = gdr::PatternSeed(a.volume, a.salt);
      // GPU memory is copied back from the device: what is checked is what landed there.
      auto got = ReadBack(**buffer, a.buffer_offset, size);
      if (!got.ok()) return Fail(got.status(), "verify (copy back)");
      if (auto bad = gdr::PatternMismatch(seed, a.offset, *got)) {
        return Fail(kExitMismatch, MismatchText(got->data(), seed, a.offset, *bad));
      }
      verdict = (*buffer)->on_gpu() ? ", verified in GPU memory" : ", verified";
    }
    if (json) {
      const gdr::json::Json doc = {{"op", "write"},
                                   {"volume", a.volume},
                                   {"offset", a.offset},
                                   {"bytes", r->bytes},
                                   {"service_us", gdr::json::Fixed(r->service_ns / 1e3, 1)},
                                   {"verified", a.verify},
                                   {"gpu", (*buffer)->gpu_pci()},
                                   {"path", r->path}};
      std::cout << gdr::json::Dump(doc) << "\n";
    } else {
      std::cout << absl::StrFormat("write %s@%u +%u -> %s: ok, %u bytes in %.1f us%s; path %s\n",
                                   a.volume, a.offset, size, BufferPlace(**buffer), r->bytes,
                                   r->service_ns / 1e3, verdict, r->path);
    }
    return kExitOk;
  }

  OpArgs a_;
};

}  // namespace

std::unique_ptr<Command> NewWriteCommand() { return std::make_unique<WriteCommand>(); }

}  // namespace gdrctl
