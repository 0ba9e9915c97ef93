// This client's rails (ClientOptions::rails) as gdrctl prints them: after `info` and `bench`,
// each rail's pairing, its share of the bytes and its resubmitted slices.
#pragma once

#include <string>

#include "gdrstore/client.h"

namespace gdrctl {

// Empty when the client runs without rails.
std::string ClientRailsText(const gdrstore::Client& client);
// `"rails":[...]` (no leading comma); empty when the client runs without rails.
std::string ClientRailsJson(const gdrstore::Client& client);

}  // namespace gdrctl
