#include "common/handoff/host_id.h"

#include <fstream>

#include "absl/strings/ascii.h"

namespace gdr::handoff {

std::string HostId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return std::string(absl::StripAsciiWhitespace(id));
}

}  // namespace gdr::handoff
