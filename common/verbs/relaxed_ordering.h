// Memory registration with PCIe relaxed ordering (IBV_ACCESS_RELAXED_ORDERING): lets the NIC's
// writes pass each other on PCIe, which ConnectX needs for full bandwidth to GPU memory behind a
// PCIe switch and on hosts whose root complex orders strictly. ibv_reg_mr(3) lists it among the
// optional access flags, which a provider may ignore; kernels older than the flag refuse it
// with EINVAL, so registration is retried without it and the outcome is kept for GetInfo.
#pragma once

#include <string>

#include "absl/functional/function_ref.h"
#include <infiniband/verbs.h>

namespace gdr::verbs {

struct RelaxedOrdering {
  bool requested = false;  // asked for (not turned off with GDRSTORE_RELAXED_ORDERING=0)
  bool accepted = false;   // the registration that succeeded carried the flag
  std::string detail;      // one line for GetInfo / gdrctl: what happened and why
};

// True unless the environment has GDRSTORE_RELAXED_ORDERING=0 (read once): the switch for a
// platform where relaxed ordering misbehaves.
bool RelaxedOrderingWanted();

// Calls `reg` with `access | IBV_ACCESS_RELAXED_ORDERING` (when wanted) and, if that is refused
// with EINVAL, EOPNOTSUPP or EPROTONOSUPPORT, once more with `access` alone. Returns the MR, or
// nullptr with errno from the last attempt (other errors, such as the memlock limit, are not
// retried). `outcome` says which registration succeeded.
ibv_mr* RegisterPreferringRelaxedOrdering(absl::FunctionRef<ibv_mr*(int access)> reg, int access,
                                          bool wanted, RelaxedOrdering* outcome);

}  // namespace gdr::verbs
