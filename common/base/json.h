// The one JSON writer of the tree's tools (gdrctl, the cluster status of libgdrclient, gdr_bench):
// Debian's nlohmann-json with object keys kept in the order they were set and printed compact,
// so a document reads like the code that built it and no caller escapes a string by hand.
#pragma once

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace gdr::json {

// An object keeps its keys in insertion order (tests and people read the output in that order).
using Json = nlohmann::ordered_json;

// Compact text (`{"a":1,"b":[true,"x"]}`). Bytes that are not UTF-8 (a name read from sysfs, a
// peer's message) become U+FFFD rather than an exception.
inline std::string Dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// `v` rounded to `decimals` places, for figures that were printed with "%.Nf": 12.3 rather than
// 12.345678901. Not finite stays as it is (Dump prints null for it).
inline double Fixed(double v, int decimals) {
  if (!std::isfinite(v)) return v;
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

}  // namespace gdr::json
