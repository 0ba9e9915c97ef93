// One line of `gdrctl doctor`: which check, about what, the verdict, what was found and, when
// the verdict is not PASS, what to do about it.
#pragma once

#include <string>

namespace gdrctl::doctor {

enum class Verdict { kPass, kWarn, kFail, kSkip };

// "PASS", "WARN", "FAIL", "SKIP".
const char* VerdictName(Verdict v);

struct CheckResult {
  std::string check;    // stable id, e.g. "rdma.mtu": scripts and tests key on it
  std::string subject;  // "mlx5_0 port 1", "GPU 0000:04:00.0"; empty for the whole host
  Verdict verdict = Verdict::kSkip;
  std::string found;    // one line: what is there
  std::string advice;   // one line: what to do (empty on PASS)
};

}  // namespace gdrctl::doctor
