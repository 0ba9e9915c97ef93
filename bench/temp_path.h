// Where gdr_bench puts its scratch files: $TMPDIR when set, else /tmp, so a test can keep a
// run's leftovers (the daemon's log, the clients' log) inside its own directory.
#pragma once

#include <stdlib.h>

#include <string>

namespace gdrbench {

// "<tmp>/<prefix>.XXXXXX", a template for mkdtemp/mkstemp.
inline std::string TempTemplate(const std::string& prefix) {
  const char* dir = ::getenv("TMPDIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/" + prefix + ".XXXXXX";
}

}  // namespace gdrbench
