#include "client/gdrctl/doctor/doctor.h"

#include <unistd.h>

#include <algorithm>
#include <ostream>

#include "client/gdrctl/doctor/host_facts.h"
#include "client/gdrctl/doctor/report.h"

namespace gdrctl::doctor {

int RunDoctor(const DoctorOptions& o, Probes& probes, std::ostream& out) {
  const HostFacts facts = ReadHostFacts(o.sysfs_root, o.proc_root);
  const std::vector<CheckResult> results = RunChecks(facts, probes, o.checks);
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  const ReportHeader header{host, o.checks.role == Role::kStorage ? "storage" : "client",
                            o.sysfs_root, o.proc_root};
  if (o.json) {
    out << FormatJson(header, results) << "\n";
  } else {
    out << FormatText(header, results);
  }
  out.flush();
  const bool failed = std::any_of(results.begin(), results.end(), [](const CheckResult& r) {
    return r.verdict == Verdict::kFail;
  });
  return failed ? 1 : 0;
}

}  // namespace gdrctl::doctor
