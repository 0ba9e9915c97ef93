// The narrow seam between the dc transport's logic (DCI pool, scheduling, AH cache, recovery)
// and the few mlx5dv/ibv calls it needs. Mlx5DcDevice (mlx5_dc_device.h) implements it on a
// real ConnectX through the shared verbs core; tests implement it with a fake that records
// posted work and injects completions and errors. Nothing above this line touches hardware.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/verbs/completion_poller.h"
#include "daemon/transport/dc/dc_options.h"
#include "daemon/transport/dc/dc_endpoint.h"

namespace gdr::dc {

// What the device offers for DC, as queried through this seam.
struct DcCaps {
  bool mlx5 = false;          // mlx5dv_is_supported() on the device
  bool dc = false;            // DC initiators can be created (probed with one DCI)
  std::string why_not;        // when !mlx5 || !dc: one line naming the missing capability
  uint32_t max_qp = 0;        // ibv_device_attr.max_qp
  uint32_t max_qp_wr = 0;     // ibv_device_attr.max_qp_wr: send-queue slots (mlx5: 64-byte WQEBBs)
  uint8_t max_qp_rd_atom = 0; // ibv_device_attr.max_qp_init_rd_atom: RC's READ initiator depth
  // mlx5dv_context.max_dc_init_rd_atom (MLX5DV_CONTEXT_MASK_MAX_DC_RD_ATOM): the DCI's own READ
  // depth limit, which kernels since 6.2 check at RTR->RTS; 0 when not reported.
  uint8_t max_dc_init_rd_atom = 0;
  uint32_t port_active_mtu = 0;  // bytes; the DCIs' path MTU may not exceed it
  // DCI stream channels (MLX5DV_CONTEXT_MASK_DCI_STREAMS); 0 when the device has none.
  uint8_t max_log_num_concurent = 0;
  uint8_t max_log_num_errored = 0;
  uint32_t port_max_msg_size = 0;
  std::string where;          // "mlx5_0 port 1": the port the DCIs send from (GetInfo, logs)
};

// An address handle (ibv_ah) to one remote port. Destroyed when the last holder lets go: the
// AH cache holds one reference, every op using it holds another until its last completion, so
// evicting an entry never destroys an AH that a posted work request still names.
class AddressHandle {
 public:
  virtual ~AddressHandle() = default;
};

enum class DcOpcode {
  kWrite,  // store -> client (RPC Write)
  kRead,   // client -> store (RPC Read)
};

// One RDMA work request through a DCI. `handler` is the wr_id: the verbs core's completion
// poller calls it once with the work completion (success or not).
struct DcWr {
  verbs::CompletionHandler* handler = nullptr;
  DcOpcode op = DcOpcode::kWrite;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t local_addr = 0;
  uint32_t lkey = 0;
  uint32_t length = 0;
  AddressHandle* ah = nullptr;
  uint32_t dct_number = 0;
  DcAccessKey access_key;
  uint16_t stream = 0;  // DCI stream channel; 0 when the DCI has none
};

class DcDevice {
 public:
  virtual ~DcDevice() = default;

  // What the device offers; fixed after creation. Thread-safe.
  virtual const DcCaps& caps() const = 0;

  // Creates DCI number `index` (0-based, dense) with `settings` and brings it to RTS. Errors:
  // the verbs call that failed (mlx5dv_create_qp, ibv_modify_qp ...) with its errno.
  virtual absl::Status CreateDci(uint32_t index, const DciSettings& settings) = 0;

  // ibv_create_ah for `key` with the routing in `settings`. The errno status of ibv_create_ah.
  virtual absl::StatusOr<std::shared_ptr<AddressHandle>> CreateAh(const AhKey& key,
                                                                  const AhSettings& settings) = 0;

  // Posts `wrs` on DCI `dci` as one doorbell. Callers serialize posting per DCI and reserved
  // the send-queue slots; the device reserves one completion-queue slot per WR (the CQ may be
  // shared with other transports) and answers RESOURCE_EXHAUSTED when the CQ is full. On
  // error nothing of the batch was posted.
  virtual absl::Status Post(uint32_t dci, std::span<const DcWr> wrs) = 0;

  // `n` completions of posted WRs were consumed: their CQ slots are free again.
  virtual void ReleaseCompletionSlots(uint32_t n) = 0;

  // Whether DCI `dci` is in the ERR state (ibv_query_qp). With streams, an error completion
  // leaves the DCI in RTS unless too many streams are in error (mlx5dv_dci_stream_id_reset(3)).
  virtual absl::StatusOr<bool> DciInError(uint32_t dci) = 0;

  // RESET -> INIT -> RTR -> RTS on a DCI whose work requests have all completed.
  virtual absl::Status RecoverDci(uint32_t dci) = 0;

  // mlx5dv_dci_stream_id_reset on a stream whose work requests have all completed.
  virtual absl::Status ResetStream(uint32_t dci, uint16_t stream) = 0;

  // Moves every DCI to ERR so each outstanding work request completes (IBV_WC_WR_FLUSH_ERR).
  // Used at shutdown. May deliver completions before it returns: never call it with a lock
  // that a completion handler takes.
  virtual void FlushAll() = 0;
};

}  // namespace gdr::dc
