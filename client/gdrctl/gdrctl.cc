// gdrctl: the command-line client of gdrstored. info, write, read (with pattern verification),
// bench, cluster, topo (where NICs and GPUs sit on the PCIe tree), selftest, stats, fault
// (injected faults, through the Admin service), doctor (is this host set up for GPUDirect RDMA),
// replay and trace show (gdrstored --trace files); each in commands/NAME_cmd.cc. write/read/bench
// take --gpu to use device memory on a GPU named by PCI address or CUDA ordinal. Exit codes: 0
// ok, 1 the op or RPC failed, 2 bad usage, 3 verification mismatch.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>

#include "absl/synchronization/mutex.h"
#include "client/gdrctl/command.h"

namespace {

// Calls `f` on `app` and each subcommand under it that has none of its own.
void ForEachLeaf(CLI::App* app, const std::function<void(CLI::App*)>& f) {
  const std::vector<CLI::App*> subs = app->get_subcommands(std::function<bool(CLI::App*)>());
  if (subs.empty()) f(app);
  for (CLI::App* sub : subs) ForEachLeaf(sub, f);
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil checks every Mutex acquisition for lock-order cycles; keep that for tests.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"gdrctl: client of gdrstored (one-sided transfers between a store and your memory)"};
  app.require_subcommand(1);
  gdrctl::GlobalOptions global;
  gdrctl::AddGlobalOptions(app, &global);
  std::vector<std::unique_ptr<gdrctl::Command>> commands = gdrctl::AllCommands();
  std::vector<CLI::App*> subcommands;
  for (const auto& command : commands) {
    CLI::App* sub = command->Register(app);
    if (command->PrintsJson()) {
      ForEachLeaf(sub, [&global](CLI::App* leaf) { gdrctl::AddJsonFlag(leaf, &global); });
    }
    subcommands.push_back(sub);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "gdrctl: %s (see gdrctl --help)\n", e.what());
    return gdrctl::kExitUsage;
  }
  if (absl::Status s = gdrctl::FinishGlobalOptions(app, &global); !s.ok()) {
    return gdrctl::Fail(gdrctl::kExitUsage, std::string(s.message()));
  }
  const gdrctl::Target target(global);
  const gdrctl::Context context{global, target};
  for (size_t i = 0; i < commands.size(); ++i) {
    if (subcommands[i]->parsed()) return commands[i]->Run(context);
  }
  return gdrctl::kExitUsage;
}
