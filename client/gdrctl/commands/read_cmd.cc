// `gdrctl read`: the store reads a buffer here (host or GPU memory) into itself: a daemon, or a
// cluster volume's members when the target is a cluster (one gdrstore::Store either way).
// The buffer holds the pattern of (volume, salt).
// --verify proves the bytes reached the store: it first stores a different (random-salted)
// pattern and reads it back with a Write, then stores the requested pattern and reads that back
// too.
#include <iostream>
#include <random>

#include "absl/strings/str_format.h"
#include "client/gdrctl/commands/op_args.h"
#include "common/base/json.h"
#include "common/base/pattern.h"

namespace gdrctl {
namespace {

class ReadCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* cmd = app.add_subcommand("read", "daemon reads a buffer here into the store");
    AddOpArgs(cmd, &a_);
    cmd->add_flag("--sync", a_.sync,
                  "file-backed volume: answered only once the bytes are msync'ed to its file");
    return cmd;
  }

  int Run(const Context& ctx) override {
    if (absl::Status s = CheckGpuFlag(a_.gpu); !s.ok()) {
      return Fail(kExitUsage, std::string(s.message()));
    }
    return ctx.target.WithStore(
        [&](gdrstore::Store& store) { return Read(store, ctx.global.json); });
  }

 private:
  int Read(gdrstore::Store& store, bool json) const {
    const OpArgs& a = a_;
    const uint64_t size = a.size;
    auto src = Allocate(store, a.gpu, size + a.buffer_offset);
    if (!src.ok()) return Fail(src.status(), a.gpu.empty() ? "allocate" : "allocate --gpu");
    gdrstore::Extent extent{a.volume, a.offset, size};
    std::vector<std::byte> payload(size);  // the pattern, put into the buffer with CopyIn

    std::vector<uint64_t> salts;
    if (a.verify) {
      std::random_device rd;
      uint64_t probe = 0;
      while (probe == 0 || probe == a.salt) probe = (uint64_t{rd()} << 32) | rd();
      salts.push_back(probe);
    }
    salts.push_back(a.salt);
    absl::StatusOr<gdrstore::OpResult> r;
    std::unique_ptr<gdrstore::Buffer> check;
    for (uint64_t salt : salts) {
      const uint64_t seed = gdr::PatternSeed(a.volume, salt);
      gdr::PatternFill(seed, a.offset, payload);
      if (absl::Status st = (*src)->CopyIn(a.buffer_offset, payload.data(), size); !st.ok()) {
        return Fail(st, "fill buffer");
      }
      r = store.Submit(gdrstore::OpKind::kRead, extent, **src, a.buffer_offset, {.sync = a.sync});
      if (!r.ok()) return Fail(r.status(), "read");
      if (!a.verify) break;
      if (!check) {
        auto b = Allocate(store, a.gpu, size);
        if (!b.ok()) return Fail(b.status(), "allocate");
        check = std::move(*b);
      }
      std::vector<std::byte> zeros(size);
      if (absl::Status st = check->CopyIn(0, zeros.data(), size); !st.ok()) {
        return Fail(st, "clear verify buffer");
      }
      auto back = store.Submit(gdrstore::OpKind::kWrite, extent, *check);
      if (!back.ok()) return Fail(back.status(), "verify (write back)");
      auto got = ReadBack(*check, 0, size);
      if (!got.ok()) return Fail(got.status(), "verify (copy back)");
      if (auto bad = gdr::PatternMismatch(seed, a.offset, *got)) {
        return Fail(kExitMismatch, MismatchText(got->data(), seed, a.offset, *bad));
      }
    }
    if (json) {
      const gdr::json::Json doc = {{"op", "read"},
                                   {"volume", a.volume},
                                   {"offset", a.offset},
                                   {"bytes", r->bytes},
                                   {"service_us", gdr::json::Fixed(r->service_ns / 1e3, 1)},
                                   {"synced", r->synced},
                                   {"verified", a.verify},
                                   {"path", r->path}};
      std::cout << gdr::json::Dump(doc) << "\n";
    } else {
      std::cout << absl::StrFormat(
          "read %s -> %s@%u +%u: ok, %u bytes in %.1f us%s%s; path %s\n", BufferPlace(**src),
          a.volume, a.offset, size, r->bytes, r->service_ns / 1e3,
          r->synced ? ", msync'ed to the volume's file" : "", a.verify ? ", verified" : "",
          r->path);
    }
    return kExitOk;
  }

  OpArgs a_;
};

}  // namespace

std::unique_ptr<Command> NewReadCommand() { return std::make_unique<ReadCommand>(); }

}  // namespace gdrctl
