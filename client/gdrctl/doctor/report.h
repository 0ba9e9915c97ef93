// How `gdrctl doctor` prints its result lines: aligned text for people (each non-PASS line
// followed by what to do), or one JSON object for scripts and bug reports.
#pragma once

#include <string>
#include <vector>

#include "client/gdrctl/doctor/check_result.h"

namespace gdrctl::doctor {

struct ReportHeader {
  std::string host;  // hostname
  std::string role;  // "client", "storage"
  std::string sysfs_root;
  std::string proc_root;
};

// Header line, one line per result ("WARN rdma.mtu     mlx5_0 port 1: active MTU 1024 ..."),
// "  -> advice" under each non-PASS, and a summary line with the counts.
std::string FormatText(const ReportHeader& header, const std::vector<CheckResult>& results);

// {"host":..,"role":..,"sysfs_root":..,"proc_root":..,"checks":[{"check","subject","status",
// "found","advice"}...],"summary":{"pass":N,"warn":N,"fail":N,"skip":N}}
std::string FormatJson(const ReportHeader& header, const std::vector<CheckResult>& results);

}  // namespace gdrctl::doctor
