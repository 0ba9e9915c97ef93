// `gdrctl trace show FILE`: a gdrstored --trace file's summary and first records (trace_show.h).
#include <iostream>

#include "client/gdrctl/command.h"
#include "client/gdrctl/trace_show.h"

namespace gdrctl {
namespace {

class TraceCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* trace = app.add_subcommand("trace", "read a gdrstored --trace file");
    trace->require_subcommand(1);
    CLI::App* show = trace->add_subcommand(
        "show", "summary (clients, volumes, ops and bytes per kind, span) and the first records");
    show->add_option("file", file_, "trace file")->required();
    show->add_option("-n,--records", records_, "records to list")->capture_default_str();
    return trace;
  }

  bool PrintsJson() const override { return false; }

  int Run(const Context&) override { return ShowTrace(file_, records_, std::cout, std::cerr); }

 private:
  std::string file_;
  uint64_t records_ = 20;
};

}  // namespace

std::unique_ptr<Command> NewTraceCommand() { return std::make_unique<TraceCommand>(); }

}  // namespace gdrctl
