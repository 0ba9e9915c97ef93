// gdrctl's commands: one file under commands/ per command, each a Command that adds its
// subcommand and options to the app and runs it (3FS's admin CLI keeps one handler per file the
// same way); registry.cc lists them in the order `gdrctl --help` shows them.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/gdrctl/global_options.h"
#include "client/gdrctl/target.h"

namespace gdrctl {

// gdrctl's exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // the op or RPC failed
inline constexpr int kExitUsage = 2;
inline constexpr int kExitMismatch = 3;  // verification found other bytes

// What a command runs with: the global options, checked, and where they point.
struct Context {
  const GlobalOptions& global;
  const Target& target;
};

class Command {
 public:
  virtual ~Command() = default;
  // Adds the command's subcommand (with its own subcommands, if any) and options to `app`,
  // binding the options to the command's members; returns the subcommand. Called once, before
  // parsing.
  virtual CLI::App* Register(CLI::App& app) = 0;
  // Whether the command prints JSON with --json: main() then accepts --json after its name too
  // (`gdrctl bench --json`, where people put it), on each of its leaf subcommands.
  virtual bool PrintsJson() const { return true; }
  // Runs the command named on the command line; gdrctl's exit code. Errors go to stderr.
  virtual int Run(const Context& ctx) = 0;
};

// Every command, in --help order. Defined in registry.cc.
std::vector<std::unique_ptr<Command>> AllCommands();

// Prints "gdrctl: WHAT" to stderr and returns `code`.
int Fail(int code, const std::string& what);
// Prints "gdrctl: CONTEXT: CODE: message" to stderr and returns kExitFailed.
int Fail(const absl::Status& s, const std::string& context);

}  // namespace gdrctl
