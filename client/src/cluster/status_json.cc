#include "client/src/cluster/status_json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/src/cluster/layout.h"

namespace gdr::cluster {

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(ch));
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string StatusJson(const std::string& source,
                       const std::vector<gdrstore::ClusterMemberStatus>& members,
                       const std::vector<gdrstore::v1::ClusterVolume>& volumes) {
  std::vector<std::string> ms, vs;
  for (const gdrstore::ClusterMemberStatus& m : members) {
    ms.push_back(absl::StrCat(
        "{\"entry\":", ToJson(m.entry), ",\"present\":", m.present ? "true" : "false",
        ",\"healthy\":", m.healthy ? "true" : "false", ",\"error\":", JsonQuote(m.error),
        ",\"lease_ttl_s\":", m.lease_ttl_s, ",\"ops\":", m.ops, ",\"bytes\":", m.bytes,
        ",\"errors\":", m.errors, "}"));
  }
  for (const gdrstore::v1::ClusterVolume& v : volumes) vs.push_back(ToJson(v));
  return absl::StrCat("{\"source\":", JsonQuote(source), ",\"members\":[", absl::StrJoin(ms, ","),
                      "],\"volumes\":[", absl::StrJoin(vs, ","), "]}");
}

}  // namespace gdr::cluster
