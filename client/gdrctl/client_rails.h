// This client's rails (ClientOptions::rails) as gdrctl prints them: after `info` and `bench`,
// each rail's pairing, its share of the bytes and its resubmitted slices.
#pragma once

#include <string>

#include "common/base/json.h"
#include "gdrstore/client.h"

namespace gdrctl {

// Empty when the client runs without rails.
std::string ClientRailsText(const gdrstore::Client& client);
// The "rails" array of `info --json` and `bench --json`; empty when the client runs without rails.
gdr::json::Json ClientRailsJson(const gdrstore::Client& client);

}  // namespace gdrctl
