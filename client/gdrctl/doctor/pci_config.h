// The part of a PCI device's configuration space the doctor reads: the extended capability list
// (from offset 0x100) and in it Access Control Services (cap id 0x000D), whose P2P Request /
// Completion Redirect bits send peer-to-peer traffic up to the root complex instead of across
// the switch. sysfs gives only the first 64 bytes to non-root readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace gdrctl::doctor {

struct AcsState {
  bool present = false;  // the device has an ACS extended capability
  uint16_t control = 0;  // ACS Control register (cap + 6)
  bool request_redirect() const { return control & 0x0004; }
  bool completion_redirect() const { return control & 0x0008; }
  // "ReqRedir+ CmpltRedir-" in lspci's words.
  std::string Describe() const;
};

// The first extended config offset; a config file shorter than this holds no extended caps.
inline constexpr size_t kExtendedConfigStart = 0x100;

// Walks the extended capability list of `config` (the bytes of sysfs `config`). nullopt when
// `config` is too short to hold it (not root, or a conventional PCI device); present=false
// when the list has no ACS entry. A malformed list (loop, pointer past the end) ends the walk.
std::optional<AcsState> ParseAcs(absl::string_view config);

}  // namespace gdrctl::doctor
