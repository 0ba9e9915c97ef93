#include "client/gdrctl/command.h"

#include <cstdio>

namespace gdrctl {

int Fail(int code, const std::string& what) {
  std::fprintf(stderr, "gdrctl: %s\n", what.c_str());
  return code;
}

int Fail(const absl::Status& s, const std::string& context) {
  return Fail(kExitFailed, context + ": " + absl::StatusCodeToString(s.code()) + ": " +
                               std::string(s.message()));
}

}  // namespace gdrctl
