#include "client/gdrctl/doctor/report.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gdrctl::doctor {
namespace {

std::array<int, 4> Count(const std::vector<CheckResult>& results) {
  std::array<int, 4> n{};
  for (const CheckResult& r : results) ++n[static_cast<int>(r.verdict)];
  return n;
}

}  // namespace

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string FormatText(const ReportHeader& h, const std::vector<CheckResult>& results) {
  std::string out = absl::StrCat("gdrctl doctor: ", h.role, " host ", h.host,
                                 h.sysfs_root == "/sys" ? "" : " (sysfs " + h.sysfs_root + ")",
                                 h.proc_root == "/proc" ? "" : " (proc " + h.proc_root + ")",
                                 "\n");
  for (const CheckResult& r : results) {
    absl::StrAppendFormat(&out, "%s %-16s %s%s%s\n", VerdictName(r.verdict), r.check, r.subject,
                          r.subject.empty() ? "" : ": ", r.found);
    if (!r.advice.empty()) absl::StrAppend(&out, "     -> ", r.advice, "\n");
  }
  const std::array<int, 4> n = Count(results);
  absl::StrAppendFormat(&out, "summary: %d PASS, %d WARN, %d FAIL, %d SKIP\n", n[0], n[1], n[2],
                        n[3]);
  return out;
}

std::string FormatJson(const ReportHeader& h, const std::vector<CheckResult>& results) {
  std::string out = absl::StrCat("{\"host\":", JsonString(h.host), ",\"role\":",
                                 JsonString(h.role), ",\"sysfs_root\":", JsonString(h.sysfs_root),
                                 ",\"proc_root\":", JsonString(h.proc_root), ",\"checks\":[");
  for (size_t i = 0; i < results.size(); ++i) {
    const CheckResult& r = results[i];
    absl::StrAppend(&out, i ? "," : "", "{\"check\":", JsonString(r.check),
                    ",\"subject\":", JsonString(r.subject), ",\"status\":\"",
                    VerdictName(r.verdict), "\",\"found\":", JsonString(r.found),
                    ",\"advice\":", JsonString(r.advice), "}");
  }
  const std::array<int, 4> n = Count(results);
  absl::StrAppendFormat(&out, "],\"summary\":{\"pass\":%d,\"warn\":%d,\"fail\":%d,\"skip\":%d}}",
                        n[0], n[1], n[2], n[3]);
  return out;
}

}  // namespace gdrctl::doctor
