#include "client/src/cluster/status_json.h"

#include "client/src/cluster/layout.h"
#include "common/base/json.h"

namespace gdr::cluster {

using gdr::json::Json;

Json MessageJson(const google::protobuf::Message& message) {
  // The protobuf JSON printer's text (proto field names, 64-bit integers as strings), taken in
  // as a value so that it nests in a document of the one writer.
  Json j = Json::parse(ToJson(message), nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? Json() : j;
}

std::string StatusJson(const std::string& source,
                       const std::vector<gdrstore::ClusterMemberStatus>& members,
                       const std::vector<gdrstore::v1::ClusterVolume>& volumes) {
  Json ms = Json::array(), vs = Json::array();
  for (const gdrstore::ClusterMemberStatus& m : members) {
    ms.push_back({{"entry", MessageJson(m.entry)},
                  {"present", m.present},
                  {"healthy", m.healthy},
                  {"error", m.error},
                  {"lease_ttl_s", m.lease_ttl_s},
                  {"ops", m.ops},
                  {"bytes", m.bytes},
                  {"errors", m.errors}});
  }
  for (const gdrstore::v1::ClusterVolume& v : volumes) vs.push_back(MessageJson(v));
  const Json doc = {{"source", source}, {"members", std::move(ms)}, {"volumes", std::move(vs)}};
  return gdr::json::Dump(doc);
}

}  // namespace gdr::cluster
