// DcDevice on a real mlx5 NIC, built on the shared verbs core: DCIs are verbs::QueuePairs made
// by verbs::CreateDci (mlx5dv_create_qp), posted through QueuePair::Post with
// mlx5dv_wr_set_dc_addr as the per-WR address hook, completed by the device's one
// CompletionPoller, recovered with QueuePair::Recover. Only the calls the seam names live here.
// It cannot run on this project's CI machines (no ConnectX): it is compiled and reviewed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/verbs/completion_poller.h"
#include "common/verbs/dc_qp.h"
#include "common/verbs/queue_pair.h"
#include "common/verbs/verbs_device.h"
#include "daemon/transport/dc/dc_device.h"

namespace gdr::dc {

class Mlx5DcDevice final : public DcDevice {
 public:
  // Probes `device` for DC (verbs::ProbeDc). Never fails: caps() says what is missing. `device`
  // and `poller` must outlive the returned object; every DCI's completions go to `poller`.
  static std::unique_ptr<Mlx5DcDevice> Open(const verbs::VerbsDevice* device,
                                            verbs::CompletionPoller* poller);
  // Destroys the DCIs. Their work must have completed (DcInitiator::Shutdown drains it).
  ~Mlx5DcDevice() override = default;

  const DcCaps& caps() const override { return caps_; }
  absl::Status CreateDci(uint32_t index, const DciSettings& settings) override;
  absl::StatusOr<std::shared_ptr<AddressHandle>> CreateAh(const AhKey& key,
                                                          const AhSettings& settings) override;
  absl::Status Post(uint32_t dci, std::span<const DcWr> wrs) override;
  void ReleaseCompletionSlots(uint32_t n) override;
  absl::StatusOr<bool> DciInError(uint32_t dci) override;
  absl::Status RecoverDci(uint32_t dci) override;
  absl::Status ResetStream(uint32_t dci, uint16_t stream) override;
  void FlushAll() override;

 private:
  Mlx5DcDevice(const verbs::VerbsDevice* device, verbs::CompletionPoller* poller, DcCaps caps)
      : device_(device), poller_(poller), caps_(std::move(caps)) {}
  struct Dci {
    std::unique_ptr<verbs::QueuePair> qp;
    mlx5dv_qp_ex* mqp = nullptr;
    std::vector<verbs::QpTransition> bring_up;
    bool streams = false;
  };
  const verbs::VerbsDevice* const device_;
  verbs::CompletionPoller* const poller_;
  const DcCaps caps_;
  std::vector<Dci> dcis_;  // grown only during DcInitiator::Create, before any Post
};

// DcCaps from a verbs::DcProbe and the port `port` of device `device_name`.
DcCaps CapsFromProbe(const verbs::DcProbe& probe, const std::string& device_name,
                     const verbs::PortInfo& port);

}  // namespace gdr::dc
