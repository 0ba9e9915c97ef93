// `gdrctl selftest`: an end-to-end check of --transport against the daemon (selftest.h): verified
// Writes and Reads of several sizes, a wrong rkey on purpose and the recovery; PASS/FAIL per step.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/gdrctl/command.h"
#include "client/gdrctl/selftest.h"
#include "client/gdrctl/size_flag.h"
#include "common/base/units.h"

namespace gdrctl {
namespace {

class SelftestCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* selftest = app.add_subcommand(
        "selftest",
        "end-to-end check of --transport against the daemon: verified Writes/Reads of several "
        "sizes, a wrong rkey on purpose and the recovery; PASS/FAIL per step");
    selftest->add_option("--volume", st_.volume, "volume to use")->capture_default_str();
    AddSizeOption(selftest, "-o,--offset", &st_.offset,
                  "first byte of the volume the steps use (e.g. 1MiB)");
    selftest->add_option("--sizes", sizes_,
                         "comma-separated op sizes (default 1,4095,64KiB,1MiB+7,16MiB)");
    return selftest;
  }

  bool PrintsJson() const override { return false; }

  int Run(const Context& ctx) override {
    SelftestOptions st = st_;
    for (absl::string_view part : absl::StrSplit(sizes_, ',', absl::SkipEmpty())) {
      absl::StatusOr<uint64_t> n = gdr::ParseSize(part);
      if (!n.ok() || *n == 0) {
        return Fail(kExitUsage, absl::StrCat("--sizes: bad size '", part, "'"));
      }
      st.sizes.push_back(*n);
    }
    absl::StatusOr<gdrstore::ClientOptions> o = ctx.target.ClientOptions();
    if (!o.ok()) return Fail(o.status(), "connect");
    st.client = *std::move(o);
    return RunSelftest(st, std::cout) == 0 ? kExitOk : kExitFailed;
  }

 private:
  SelftestOptions st_;
  std::string sizes_;
};

}  // namespace

std::unique_ptr<Command> NewSelftestCommand() { return std::make_unique<SelftestCommand>(); }

}  // namespace gdrctl
