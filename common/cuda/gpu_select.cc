#include "common/cuda/gpu_select.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace gdr::cuda {
namespace {

constexpr absl::string_view kForms =
    "want a PCI address DDDD:BB:DD.F (e.g. 0000:b7:00.0), BB:DD.F (e.g. b7:00.0) or a CUDA "
    "ordinal (e.g. 0)";

bool ParseHex(absl::string_view s, size_t max_digits, uint32_t max_value, uint32_t* out) {
  if (s.empty() || s.size() > max_digits) return false;
  uint32_t v = 0;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
    v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c))
                                           ? c - '0'
                                           : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10);
  }
  if (v > max_value) return false;
  *out = v;
  return true;
}

}  // namespace

absl::StatusOr<std::string> CanonicalPciAddress(absl::string_view text) {
  const std::string t(absl::StripAsciiWhitespace(text));
  std::vector<absl::string_view> colon = absl::StrSplit(t, ':');
  uint32_t domain = 0, bus = 0, dev = 0, fn = 0;
  absl::string_view bus_text, devfn;
  if (colon.size() == 3) {
    if (!ParseHex(colon[0], 8, 0xffffffffu, &domain)) {
      return absl::InvalidArgumentError(absl::StrCat("bad PCI domain in '", t, "': ", kForms));
    }
    bus_text = colon[1];
    devfn = colon[2];
  } else if (colon.size() == 2) {
    bus_text = colon[0];
    devfn = colon[1];
  } else {
    return absl::InvalidArgumentError(absl::StrCat("'", t, "' is not a PCI address: ", kForms));
  }
  std::vector<absl::string_view> dot = absl::StrSplit(devfn, '.');
  if (dot.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", t, "' has no function number (.F): ", kForms));
  }
  if (!ParseHex(bus_text, 2, 0xff, &bus) || !ParseHex(dot[0], 2, 0x1f, &dev) ||
      !ParseHex(dot[1], 1, 7, &fn)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad PCI address '", t, "' (bus 00-ff, device 00-1f, function 0-7): ", kForms));
  }
  return absl::StrFormat("%04x:%02x:%02x.%x", domain, bus, dev, fn);
}

std::string DescribeGpus(const std::vector<GpuInfo>& gpus) {
  if (gpus.empty()) return "none";
  std::string out;
  for (const GpuInfo& g : gpus) {
    absl::StrAppend(&out, out.empty() ? "" : "; ", g.ordinal, " ", g.pci, " ", g.name);
  }
  return out;
}

absl::Status ValidateGpuSpec(absl::string_view spec) {
  absl::StatusOr<GpuInfo> r = ResolveGpu(spec, {});
  if (r.status().code() == absl::StatusCode::kInvalidArgument) return r.status();
  return absl::OkStatus();
}

absl::StatusOr<GpuInfo> ResolveGpu(absl::string_view spec, const std::vector<GpuInfo>& gpus) {
  const absl::string_view s = absl::StripAsciiWhitespace(spec);
  if (s.empty()) return absl::InvalidArgumentError(absl::StrCat("empty GPU name: ", kForms));
  if (s.find(':') == absl::string_view::npos) {
    int ordinal = -1;
    if (!absl::SimpleAtoi(s, &ordinal) || ordinal < 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad GPU '", s, "': ", kForms));
    }
    for (const GpuInfo& g : gpus)
      if (g.ordinal == ordinal) return g;
    return absl::NotFoundError(absl::StrCat("no GPU with CUDA ordinal ", ordinal,
                                            "; GPUs present: ", DescribeGpus(gpus)));
  }
  absl::StatusOr<std::string> pci = CanonicalPciAddress(s);
  if (!pci.ok()) return pci.status();
  for (const GpuInfo& g : gpus)
    if (g.pci == *pci) return g;
  return absl::NotFoundError(
      absl::StrCat("no GPU at PCI address ", *pci, "; GPUs present: ", DescribeGpus(gpus)));
}

}  // namespace gdr::cuda
