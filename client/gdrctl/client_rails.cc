#include "client/gdrctl/client_rails.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/units.h"

namespace gdrctl {

std::string ClientRailsText(const gdrstore::Client& client) {
  const std::vector<gdrstore::RailStats> rails = client.transport_info().rails;
  if (rails.empty()) return "";
  uint64_t total = 0;
  for (const auto& r : rails) total += r.bytes;
  std::string out = "rails (this client):\n";
  for (const auto& r : rails) {
    const double share = total ? 100.0 * static_cast<double>(r.bytes) / static_cast<double>(total)
                               : 0.0;
    absl::StrAppend(
        &out, absl::StrFormat("  %-10s -> %-14s %6s Mb/s  %8u slices %10s (%5.1f%%)  %u failed, "
                              "%u resubmitted here%s\n",
                              r.device, r.daemon_rail, absl::StrCat(r.speed_mbps), r.ops,
                              gdr::FormatSize(r.bytes), share, r.errors, r.resubmitted,
                              r.passed_over ? ", passed over now" : ""));
  }
  if (const std::string notes = client.transport_info().rail_notes; !notes.empty()) {
    absl::StrAppend(&out, "  left out: ", notes, "\n");
  }
  return out;
}

gdr::json::Json ClientRailsJson(const gdrstore::Client& client) {
  gdr::json::Json out = gdr::json::Json::array();
  for (const gdrstore::RailStats& r : client.transport_info().rails) {
    out.push_back({{"device", r.device},
                   {"daemon_rail", r.daemon_rail},
                   {"speed_mbps", r.speed_mbps},
                   {"ops", r.ops},
                   {"bytes", r.bytes},
                   {"errors", r.errors},
                   {"resubmitted", r.resubmitted},
                   {"passed_over", r.passed_over}});
  }
  return out;
}

}  // namespace gdrctl
