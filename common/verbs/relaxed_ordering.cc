#include "common/verbs/relaxed_ordering.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gdr::verbs {

bool RelaxedOrderingWanted() {
  static const bool wanted = [] {
    const char* v = std::getenv("GDRSTORE_RELAXED_ORDERING");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return wanted;
}

ibv_mr* RegisterPreferringRelaxedOrdering(absl::FunctionRef<ibv_mr*(int access)> reg, int access,
                                          bool wanted, RelaxedOrdering* outcome) {
  *outcome = RelaxedOrdering{};
  if (!wanted) {
    outcome->detail = "off (GDRSTORE_RELAXED_ORDERING=0)";
    return reg(access);
  }
  outcome->requested = true;
  errno = 0;
  if (ibv_mr* mr = reg(access | IBV_ACCESS_RELAXED_ORDERING); mr != nullptr) {
    outcome->accepted = true;
    outcome->detail = "on (IBV_ACCESS_RELAXED_ORDERING accepted; the device applies it where "
                      "its PCIe settings allow)";
    return mr;
  }
  const int err = errno;
  if (err != EINVAL && err != EOPNOTSUPP && err != EPROTONOSUPPORT) {
    errno = err;
    return nullptr;
  }
  errno = 0;
  ibv_mr* mr = reg(access);
  const int retry_err = errno;
  outcome->detail = absl::StrCat("off (ibv_reg_mr refused IBV_ACCESS_RELAXED_ORDERING: ",
                                 std::strerror(err), "; registered without it)");
  errno = retry_err;
  return mr;
}

}  // namespace gdr::verbs
