// Fuzzes the etcd:// URL parser (common/etcd/etcd_url.h), which reads the cluster's URL from
// flags and configuration. Properties: it never crashes; refusals are INVALID_ARGUMENT quoting
// what they refuse; an accepted URL has endpoints that are HOST:PORT with a port in 1..65535
// and a prefix that starts with '/', does not end with one and holds no empty, '.' or '..'
// segment; and the URL written back from them parses to the same.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/etcd/etcd_url.h"
#include "common/base/host_port.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<gdr::etcd::EtcdUrl> url = gdr::etcd::ParseEtcdUrl(text);
  if (!url.ok()) {
    GDR_FUZZ_CHECK(absl::IsInvalidArgument(url.status()));
    GDR_FUZZ_CHECK(size > 4096 || absl::StrContains(url.status().message(), text));
    return 0;
  }
  GDR_FUZZ_CHECK(!url->endpoints.empty());
  for (const std::string& endpoint : url->endpoints) {
    absl::StatusOr<gdr::HostPort> hp = gdr::SplitHostPort(endpoint);
    GDR_FUZZ_CHECK(hp.ok() && !hp->host.empty() && hp->port != 0);
  }
  GDR_FUZZ_CHECK(absl::StartsWith(url->prefix, "/") && !absl::EndsWith(url->prefix, "/"));
  for (absl::string_view segment : absl::StrSplit(url->prefix.substr(1), '/')) {
    GDR_FUZZ_CHECK(!segment.empty() && segment != "." && segment != "..");
  }
  const std::string again = "etcd://" + absl::StrJoin(url->endpoints, ",") + url->prefix;
  absl::StatusOr<gdr::etcd::EtcdUrl> reparsed = gdr::etcd::ParseEtcdUrl(again);
  GDR_FUZZ_CHECK(reparsed.ok() && reparsed->endpoints == url->endpoints &&
                 reparsed->prefix == url->prefix);
  return 0;
}
