// The daemon's dc transport: a pool of mlx5 DC initiators (DCIs) that reach any client's DC
// target by (address handle, DCT number, DC access key) per work request, behind the same
// Initiator interface as tcp and rc. The DCI count is independent of the number of clients.
// All hardware access goes through DcDevice (dc_device.h), so this logic is unit-tested with a
// fake; on a ConnectX the device is Mlx5DcDevice on the daemon's verbs core.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/verbs/completion_poller.h"
#include "daemon/transport/dc/ah_cache.h"
#include "daemon/transport/dc/dc_device.h"
#include "daemon/transport/dc/dc_endpoint.h"
#include "daemon/transport/dc/dci_scheduler.h"
#include "daemon/transport/initiator.h"

namespace gdr::dc {

// The lkey of the registered store memory an op moves ([op.local, +op.length) of volume
// op.volume): the daemon registers its volumes once at start. FAILED_PRECONDITION when that
// memory is not registered.
using LocalKeyFn = std::function<absl::StatusOr<uint32_t>(const TransferOp& op)>;

class DcInitiator final : public Initiator {
 public:
  // Checks the device's caps (FAILED_PRECONDITION naming the missing capability when DC is not
  // available), bounds the options by them (INVALID_ARGUMENT naming the option: --dci-count
  // above half max_qp, --dc-sq-depth above what a DCI holds, --dc-mtu above the port's), caps
  // the READ depth at the DC (else RC) limit, creates the DCIs and brings them to RTS (the
  // failing verbs call's status).
  static absl::StatusOr<std::unique_ptr<DcInitiator>> Create(std::unique_ptr<DcDevice> device,
                                                             const DcInitiatorOptions& options,
                                                             LocalKeyFn local_key);
  ~DcInitiator() override;

  // buffer.dc, as ParseDcDestination reads it.
  absl::StatusOr<std::shared_ptr<const Destination>> ParseDestination(
      const gdrstore::v1::RemoteBuffer& buffer) const override {
    return ParseDcDestination(buffer);
  }
  // The op's DcDestination is where it goes. An injected path fault (op.inject) does not
  // apply: no fault kind reaches a dc op (common/wire/fault_spec.h). FAILED_PRECONDITION when
  // its DCT's path MTU differs from the DCIs'; RESOURCE_EXHAUSTED when the DCIs' send queues lack room for its chunks;
  // UNAVAILABLE when no DCI is ready or the address handle cannot be made; CANCELLED after
  // Shutdown. `done` gets OK, or the first chunk's failure: PERMISSION_DENIED
  // (remote access error: rkey/range/DC key refused), UNAVAILABLE (target unreachable:
  // retries exceeded), DATA_LOSS (other completion errors), with the verbs status name.
  // Thread-safe; never blocks on the network.
  absl::Status Submit(const TransferOp& op, OpDone done) override;
  void Shutdown() override;

  // What was chosen after capping by the device (for GetInfo and the startup log).
  struct Effective {
    uint32_t dci_count = 0;
    uint32_t sq_depth = 0;
    uint8_t max_rd_atomic = 0;
    uint32_t streams_per_dci = 1;
    uint8_t log_errored = 0;
    uint64_t chunk_bytes = 0;
    uint32_t mtu = 0;  // the DCIs' path MTU, bytes (0: the device did not say)
  };
  const Effective& effective() const { return eff_; }

  TransportKind kind() const override { return TransportKind::kDc; }
  // in_use: ready DCIs; capacity: DCIs created; clients: destinations with work in flight;
  // errors: error completions (flushes excluded); recoveries: DCIs and streams brought back.
  InitiatorStats stats() const override;
  // "16 DCIs on mlx5_0 port 1, send queue 128, max_rd_atomic 16, 16 DCI streams each".
  std::string Describe() const override;
  // GetInfo's rdma.dc: the path MTU, traffic class, SL and hop limit a client's DCT must use.
  void FillInfo(gdrstore::v1::GetInfoResponse* info) const override;

  // The DCI pool's own figures beyond InitiatorStats, for tests and diagnosis.
  struct PoolDetail {
    uint32_t outstanding_wrs = 0;
    uint64_t dci_recoveries = 0;
    uint64_t stream_resets = 0;
    uint64_t reposted_wrs = 0;
    uint32_t failed_dcis = 0;
  };
  PoolDetail pool_detail() const;
  const AhCache& ah_cache() const { return *ah_cache_; }

 private:
  struct Op;
  // One work request's completion context; its address is the wr_id.
  struct Work final : verbs::CompletionHandler {
    void OnCompletion(const ibv_wc& wc) override;
    Op* op = nullptr;
    uint64_t offset = 0;  // into the op
    uint32_t length = 0;
    uint32_t dci = 0;
    uint16_t stream = 0;
    uint32_t attempts = 0;
  };
  struct Op {
    DcInitiator* owner = nullptr;
    TransferOp op;
    uint32_t lkey = 0;
    std::shared_ptr<AddressHandle> ah;
    OpDone done;
    std::vector<Work> works;  // sized once: addresses stay valid while posted
    uint32_t pending = 0;     // works without a final outcome yet
    absl::Status status;      // first failure
  };
  using Finished = std::vector<std::pair<OpDone, absl::Status>>;

  DcInitiator(std::unique_ptr<DcDevice> device, const DcInitiatorOptions& options,
              LocalKeyFn local_key, Effective eff);
  void OnWorkCompletion(Work* w, ibv_wc_status status, uint32_t vendor_err);
  DcWr MakeWr(const Work& w) const;
  // Recovers `dci` / its `stream` once drained; returns after any device call.
  void MaybeRecover(uint32_t dci, uint16_t stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reposts flushed works while the pool has room.
  void DrainRetries(Finished* finished) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One work has its final outcome; collects the op into `finished` when it was its last.
  void Settle(Op* op, Finished* finished) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(Op* op, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Describe(const Work& w) const;

  // The device first: destroyed last, after every op (Shutdown drained them).
  std::unique_ptr<DcDevice> device_;
  const DcInitiatorOptions options_;
  const LocalKeyFn local_key_;
  const Effective eff_;
  const std::string where_;  // the device port, for Describe
  std::unique_ptr<AhCache> ah_cache_;
  mutable absl::Mutex mu_;
  DciScheduler sched_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Op*, std::unique_ptr<Op>> ops_ ABSL_GUARDED_BY(mu_);
  std::deque<Work*> retry_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool flushed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t dci_recoveries_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t stream_resets_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reposted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t error_completions_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gdr::dc
