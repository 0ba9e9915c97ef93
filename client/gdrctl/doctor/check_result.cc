#include "client/gdrctl/doctor/check_result.h"

namespace gdrctl::doctor {

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "PASS";
    case Verdict::kWarn: return "WARN";
    case Verdict::kFail: return "FAIL";
    case Verdict::kSkip: return "SKIP";
  }
  return "?";
}

}  // namespace gdrctl::doctor
