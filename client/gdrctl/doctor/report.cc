#include "client/gdrctl/doctor/report.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/json.h"

namespace gdrctl::doctor {
namespace {

std::array<int, 4> Count(const std::vector<CheckResult>& results) {
  std::array<int, 4> n{};
  for (const CheckResult& r : results) ++n[static_cast<int>(r.verdict)];
  return n;
}

}  // namespace

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
  using gdr::json::Json;
  Json checks = Json::array();
  for (const CheckResult& r : results) {
    checks.push_back({{"check", r.check},
                      {"subject", r.subject},
                      {"status", VerdictName(r.verdict)},
                      {"found", r.found},
                      {"advice", r.advice}});
  }
  const std::array<int, 4> n = Count(results);
  const Json doc = {{"host", h.host},
                    {"role", h.role},
                    {"sysfs_root", h.sysfs_root},
                    {"proc_root", h.proc_root},
                    {"checks", std::move(checks)},
                    {"summary", {{"pass", n[0]}, {"warn", n[1]}, {"fail", n[2]}, {"skip", n[3]}}}};
  return gdr::json::Dump(doc);
}

}  // namespace gdrctl::doctor
