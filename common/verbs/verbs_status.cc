#include "common/verbs/verbs_status.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gdr::verbs {

const char* WcStatusName(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "IBV_WC_SUCCESS";
    case IBV_WC_LOC_LEN_ERR: return "IBV_WC_LOC_LEN_ERR";
    case IBV_WC_LOC_QP_OP_ERR: return "IBV_WC_LOC_QP_OP_ERR";
    case IBV_WC_LOC_EEC_OP_ERR: return "IBV_WC_LOC_EEC_OP_ERR";
    case IBV_WC_LOC_PROT_ERR: return "IBV_WC_LOC_PROT_ERR";
    case IBV_WC_WR_FLUSH_ERR: return "IBV_WC_WR_FLUSH_ERR";
    case IBV_WC_MW_BIND_ERR: return "IBV_WC_MW_BIND_ERR";
    case IBV_WC_BAD_RESP_ERR: return "IBV_WC_BAD_RESP_ERR";
    case IBV_WC_LOC_ACCESS_ERR: return "IBV_WC_LOC_ACCESS_ERR";
    case IBV_WC_REM_INV_REQ_ERR: return "IBV_WC_REM_INV_REQ_ERR";
    case IBV_WC_REM_ACCESS_ERR: return "IBV_WC_REM_ACCESS_ERR";
    case IBV_WC_REM_OP_ERR: return "IBV_WC_REM_OP_ERR";
    case IBV_WC_RETRY_EXC_ERR: return "IBV_WC_RETRY_EXC_ERR";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "IBV_WC_RNR_RETRY_EXC_ERR";
    case IBV_WC_LOC_RDD_VIOL_ERR: return "IBV_WC_LOC_RDD_VIOL_ERR";
    case IBV_WC_REM_INV_RD_REQ_ERR: return "IBV_WC_REM_INV_RD_REQ_ERR";
    case IBV_WC_REM_ABORT_ERR: return "IBV_WC_REM_ABORT_ERR";
    case IBV_WC_INV_EECN_ERR: return "IBV_WC_INV_EECN_ERR";
    case IBV_WC_INV_EEC_STATE_ERR: return "IBV_WC_INV_EEC_STATE_ERR";
    case IBV_WC_FATAL_ERR: return "IBV_WC_FATAL_ERR";
    case IBV_WC_RESP_TIMEOUT_ERR: return "IBV_WC_RESP_TIMEOUT_ERR";
    case IBV_WC_GENERAL_ERR: return "IBV_WC_GENERAL_ERR";
    case IBV_WC_TM_ERR: return "IBV_WC_TM_ERR";
    case IBV_WC_TM_RNDV_INCOMPLETE: return "IBV_WC_TM_RNDV_INCOMPLETE";
  }
  return "IBV_WC_(unknown)";
}

absl::Status WcStatusToStatus(ibv_wc_status status, uint32_t vendor_err, absl::string_view what) {
  auto msg = [&](absl::string_view meaning) {
    return absl::StrCat(what, " failed: ", WcStatusName(status), " (", meaning,
                        vendor_err ? absl::StrCat(", vendor error 0x", absl::Hex(vendor_err)) : "",
                        ")");
  };
  switch (status) {
    case IBV_WC_SUCCESS:
      return absl::OkStatus();
    case IBV_WC_REM_ACCESS_ERR:
      return absl::PermissionDeniedError(
          msg("remote access error: the client's memory region refused the access; the rkey is "
              "wrong or the address range is outside the registered region"));
    case IBV_WC_REM_INV_REQ_ERR:
      return absl::InvalidArgumentError(
          msg("remote invalid request: the client's QP does not allow this operation or the "
              "length is above its limit"));
    case IBV_WC_REM_INV_RD_REQ_ERR:
      return absl::InvalidArgumentError(msg("remote invalid RD request"));
    case IBV_WC_RETRY_EXC_ERR:
      return absl::UnavailableError(
          msg("transport retry counter exceeded: the client's QP did not answer; is the client "
              "still running and its port up?"));
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return absl::UnavailableError(msg("receiver-not-ready retry counter exceeded"));
    case IBV_WC_RESP_TIMEOUT_ERR:
      return absl::UnavailableError(msg("response timeout"));
    case IBV_WC_WR_FLUSH_ERR:
      return absl::UnavailableError(
          msg("flushed: the queue pair was in error because of an earlier failure"));
    case IBV_WC_REM_OP_ERR:
      return absl::DataLossError(msg("remote operation error on the client's side"));
    case IBV_WC_BAD_RESP_ERR:
      return absl::DataLossError(msg("unexpected transport response"));
    case IBV_WC_REM_ABORT_ERR:
      return absl::DataLossError(msg("remote side aborted the operation"));
    case IBV_WC_FATAL_ERR:
      return absl::DataLossError(msg("fatal device error"));
    case IBV_WC_GENERAL_ERR:
      return absl::DataLossError(msg("general error"));
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_EEC_OP_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_MW_BIND_ERR:
    case IBV_WC_LOC_RDD_VIOL_ERR:
    case IBV_WC_INV_EECN_ERR:
    case IBV_WC_INV_EEC_STATE_ERR:
    case IBV_WC_TM_ERR:
    case IBV_WC_TM_RNDV_INCOMPLETE:
      return absl::InternalError(msg("local error on the daemon's side"));
  }
  return absl::DataLossError(absl::StrCat(what, " failed: unknown ibv_wc_status ",
                                          static_cast<int>(status)));
}

absl::Status VerbsError(int err, absl::string_view call, absl::string_view context) {
  return absl::ErrnoToStatus(
      err, absl::StrCat(call, context.empty() ? "" : " ", context, ": ", std::strerror(err)));
}

const char* QpStateName(ibv_qp_state state) {
  switch (state) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    case IBV_QPS_UNKNOWN: return "UNKNOWN";
  }
  return "UNKNOWN";
}

const char* PortStateName(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
  }
  return "UNKNOWN";
}

uint32_t MtuBytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 0;
}

absl::Status MtuFromBytes(uint32_t bytes, ibv_mtu* mtu) {
  switch (bytes) {
    case 256: *mtu = IBV_MTU_256; return absl::OkStatus();
    case 512: *mtu = IBV_MTU_512; return absl::OkStatus();
    case 1024: *mtu = IBV_MTU_1024; return absl::OkStatus();
    case 2048: *mtu = IBV_MTU_2048; return absl::OkStatus();
    case 4096: *mtu = IBV_MTU_4096; return absl::OkStatus();
    default: break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("MTU ", bytes, " is not one of 256, 512, 1024, 2048, 4096"));
}

}  // namespace gdr::verbs
