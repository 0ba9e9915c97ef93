#include "client/gdrctl/doctor/pci_config.h"

#include "absl/strings/str_cat.h"

namespace gdrctl::doctor {
namespace {

constexpr uint16_t kAcsCapId = 0x000D;

uint32_t Le32(absl::string_view b, size_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(b[at])) |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 3])) << 24;
}

}  // namespace

std::string AcsState::Describe() const {
  if (!present) return "no ACS capability";
  return absl::StrCat("ReqRedir", request_redirect() ? "+" : "-", " CmpltRedir",
                      completion_redirect() ? "+" : "-");
}

std::optional<AcsState> ParseAcs(absl::string_view config) {
  if (config.size() < kExtendedConfigStart + 4) return std::nullopt;
  AcsState acs;
  size_t at = kExtendedConfigStart;
  // Each header: cap id [15:0], version [19:16], next offset [31:20] (dword aligned, 0 ends).
  // The space holds at most (4096 - 256) / 4 headers; more means a loop.
  for (int guard = 0; guard < 960 && at >= kExtendedConfigStart && at + 4 <= config.size();
       ++guard) {
    const uint32_t header = Le32(config, at);
    if (header == 0 || header == 0xffffffffu) break;
    if ((header & 0xffff) == kAcsCapId) {
      if (at + 8 > config.size()) break;
      acs.present = true;
      acs.control = static_cast<uint16_t>(Le32(config, at + 4) >> 16);
      return acs;
    }
    at = (header >> 20) & 0xffc;
    if (at == 0) break;
  }
  return acs;
}

}  // namespace gdrctl::doctor
