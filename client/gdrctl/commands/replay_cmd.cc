// `gdrctl replay FILE`: the ops of a gdrstored --trace file issued against the daemon, one client
// per recorded client (replay.h); recorded vs replayed ops, bytes and latency.
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/gdrctl/command.h"
#include "client/gdrctl/replay.h"

namespace gdrctl {
namespace {

class ReplayCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* replay = app.add_subcommand(
        "replay",
        "issue the ops of a gdrstored --trace file against the daemon, one client per "
        "recorded client; recorded vs replayed ops, bytes and latency; exit 1 when an "
        "op fails");
    replay->add_option("file", ro_.file, "trace file (gdrstored --trace)")->required();
    replay
        ->add_option("--pace", pace_,
                     "recorded: each op at its recorded offset from the first; fast: back to "
                     "back, each client keeping its recorded number of ops in flight")
        ->capture_default_str()
        ->check(CLI::IsMember({"recorded", "fast"}));
    replay
        ->add_option("--clients", clients_,
                     "as-recorded (one client per recorded client) or N (recorded client i "
                     "replayed by client i % N)")
        ->capture_default_str();
    replay->add_option("--volume-map", map_,
                       "RECORDED=REPLAYED: issue a recorded volume's ops on another volume; "
                       "repeatable");
    replay->add_flag("--verify", ro_.verify,
                     "check gets against the volume's initial fill and store that fill with puts "
                     "(for a daemon whose volumes hold their initial fill)");
    return replay;
  }

  int Run(const Context& ctx) override {
    ReplayOptions ro = ro_;
    ro.fast = pace_ == "fast";
    ro.json = ctx.global.json;
    if (clients_ != "as-recorded") {
      uint32_t n = 0;
      if (!absl::SimpleAtoi(clients_, &n) || n == 0) {
        return Fail(kExitUsage, absl::StrCat("--clients must be as-recorded or a count > 0, not '",
                                             clients_, "'"));
      }
      ro.clients = n;
    }
    if (absl::Status s = ParseVolumeMap(map_, &ro.volume_map); !s.ok()) {
      return Fail(kExitUsage, std::string(s.message()));
    }
    const Target& target = ctx.target;
    return RunReplay(
        ro, [&target] { return target.Connect(); }, std::cout, std::cerr);
  }

 private:
  ReplayOptions ro_;
  std::string pace_ = "recorded", clients_ = "as-recorded";
  std::vector<std::string> map_;
};

}  // namespace

std::unique_ptr<Command> NewReplayCommand() { return std::make_unique<ReplayCommand>(); }

}  // namespace gdrctl
