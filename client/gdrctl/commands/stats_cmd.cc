// `gdrctl stats`: the daemon's counters (stats.h): ops, bytes, errors, latency, pools; once or,
// with --watch, every --interval seconds with rates.
#include "client/gdrctl/command.h"
#include "client/gdrctl/stats.h"

namespace gdrctl {
namespace {

class StatsCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    CLI::App* stats =
        app.add_subcommand("stats", "daemon counters: ops, bytes, errors, latency, pools");
    stats->add_flag("-w,--watch", so_.watch, "refresh every --interval seconds, with rates");
    stats->add_option("--interval", interval_s_, "seconds between --watch samples")
        ->capture_default_str()
        ->check(CLI::Range(0.05, 3600.0));
    stats->add_option("--count", so_.count, "stop --watch after this many samples (0: never)");
    return stats;
  }

  int Run(const Context& ctx) override {
    StatsOptions so = so_;
    so.json = ctx.global.json;
    so.interval = absl::Seconds(interval_s_);
    so.rpc_timeout = absl::Milliseconds(ctx.global.timeout_ms);
    return ctx.target.WithClient([&](gdrstore::Client& client) {
      absl::Status s = RunStats(client, so);
      return s.ok() ? kExitOk : Fail(s, "stats");
    });
  }

 private:
  StatsOptions so_;
  double interval_s_ = 1.0;
};

}  // namespace

std::unique_ptr<Command> NewStatsCommand() { return std::make_unique<StatsCommand>(); }

}  // namespace gdrctl
