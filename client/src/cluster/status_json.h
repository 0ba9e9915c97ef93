// A cluster's status as JSON: what `gdrctl cluster status --json` prints and
// gdrstore_cluster_status_json returns.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gdrstore/cluster.h"

namespace gdr::cluster {

// {"source": ..., "members": [{"entry": <ClusterMember>, "present", "healthy", "error",
// "lease_ttl_s", "ops", "bytes", "errors"}...], "volumes": [<ClusterVolume>...]}
std::string StatusJson(const std::string& source,
                       const std::vector<gdrstore::ClusterMemberStatus>& members,
                       const std::vector<gdrstore::v1::ClusterVolume>& volumes);

// `s` as a JSON string literal, quotes included.
std::string JsonQuote(absl::string_view s);

}  // namespace gdr::cluster
