// Verbs failures as absl::Status: errno from a verbs call, and every ibv_wc_status of a work
// completion mapped to the gRPC code a client acts on, with the verbs name in the message.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gdr::verbs {

// "IBV_WC_REM_ACCESS_ERR" etc.
const char* WcStatusName(ibv_wc_status status);

// The status a work completion with `status` (and the provider's `vendor_err`) means for the op
// it belonged to. OK for IBV_WC_SUCCESS. `what` names the op ("RDMA READ of 4096 bytes").
// Codes: REM_ACCESS_ERR -> PERMISSION_DENIED (rkey or range refused by the remote MR);
// REM_INV_REQ_ERR -> INVALID_ARGUMENT; RETRY_EXC_ERR, RNR_RETRY_EXC_ERR, RESP_TIMEOUT_ERR,
// WR_FLUSH_ERR -> UNAVAILABLE (peer unreachable or QP already in error); REM_OP_ERR,
// BAD_RESP_ERR, FATAL_ERR, GENERAL_ERR, REM_ABORT_ERR -> DATA_LOSS; local errors -> INTERNAL.
absl::Status WcStatusToStatus(ibv_wc_status status, uint32_t vendor_err, absl::string_view what);

// `call` failed with `err` (an errno value): "<call>: <strerror> [context]" with the errno's code.
absl::Status VerbsError(int err, absl::string_view call, absl::string_view context = "");

// "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR", "UNKNOWN".
const char* QpStateName(ibv_qp_state state);
// "DOWN", "INIT", "ARMED", "ACTIVE", ...
const char* PortStateName(ibv_port_state state);
// IBV_MTU_1024 -> 1024; 0 for an unknown value.
uint32_t MtuBytes(ibv_mtu mtu);
// 1024 -> IBV_MTU_1024; INVALID_ARGUMENT for anything but 256..4096 powers of two.
absl::Status MtuFromBytes(uint32_t bytes, ibv_mtu* mtu);

}  // namespace gdr::verbs
