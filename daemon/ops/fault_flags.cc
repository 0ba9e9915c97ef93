#include "daemon/ops/fault_flags.h"

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "common/wire/fault_spec.h"

namespace gdr {

void AddFaultFlags(CLI::App& app, FaultSettings* v) {
  app.add_option("--fault", v->texts,
                 "inject a fault, repeatable: kind=error|stall|corrupt|drop-link|qp-error|"
                 "rail-down[,volume=V][,client=C][,ops=get|put][,rate=P|every=N][,count=N]"
                 "[,for=DUR][,code=CODE][,delay=DUR][,rail=DEV][,seed=N] (docs/simulation.md; "
                 "re-read on SIGHUP; gdrctl fault adds more at run time)");
  app.add_option("--fault-seed", v->seed,
                 "seed of the fault rules' random choices (same seed, same rules, same ops: "
                 "same hits)")
      ->capture_default_str();
}

absl::Status CheckFaultFlags(FaultSettings* v) {
  v->specs.clear();
  for (const std::string& text : v->texts) {
    absl::StatusOr<gdrstore::v1::FaultSpec> spec = ParseFaultSpec(text);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--fault '", text, "': ", spec.status().message()));
    }
    v->specs.push_back(*std::move(spec));
  }
  return absl::OkStatus();
}

}  // namespace gdr
