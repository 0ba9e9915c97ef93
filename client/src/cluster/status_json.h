// A cluster's status as JSON: what `gdrctl cluster status --json` prints and
// gdrstore_cluster_status_json returns, written with the one JSON writer (common/base/json.h).
#pragma once

#include <string>
#include <vector>

#include "common/base/json.h"
#include "gdrstore/cluster.h"

namespace gdr::cluster {

// {"source": ..., "members": [{"entry": <ClusterMember>, "present", "healthy", "error",
// "lease_ttl_s", "ops", "bytes", "errors"}...], "volumes": [<ClusterVolume>...]}
std::string StatusJson(const std::string& source,
                       const std::vector<gdrstore::ClusterMemberStatus>& members,
                       const std::vector<gdrstore::v1::ClusterVolume>& volumes);

// `message` in protobuf's JSON mapping (proto field names; what ToJson of layout.h prints) as a
// value of the one writer, to nest in a larger document. Null if the printer failed.
gdr::json::Json MessageJson(const google::protobuf::Message& message);

}  // namespace gdr::cluster
