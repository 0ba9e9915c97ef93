// `gdrctl doctor`: reads the host's facts, runs every check and prints the report. The exit
// code is 1 when any check FAILs (WARN and SKIP do not), so scripts can gate on it.
#pragma once

#include <iosfwd>
#include <string>

#include "client/gdrctl/doctor/checks.h"
#include "client/gdrctl/doctor/probes.h"

namespace gdrctl::doctor {

struct DoctorOptions {
  CheckOptions checks;
  std::string sysfs_root = "/sys";
  std::string proc_root = "/proc";
  bool json = false;
};

// Prints the report to `out`; returns 0, or 1 when a check failed.
int RunDoctor(const DoctorOptions& options, Probes& probes, std::ostream& out);

}  // namespace gdrctl::doctor
