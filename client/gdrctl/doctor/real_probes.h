// The probes of `gdrctl doctor` made for real: libibverbs, getrlimit and /proc/self/status,
// the CUDA driver (loaded at run time), and gRPC to the daemon. Each call opens what it needs
// and closes it again, so a doctor run leaves nothing behind.
#pragma once

#include <string>

#include "client/gdrctl/doctor/probes.h"
#include "gdrstore/client.h"

namespace gdrctl::doctor {

class RealProbes : public Probes {
 public:
  // `live_devices` false: verbs and CUDA answer UNAVAILABLE, because the sysfs being read is
  // not this host's (--sysfs-root on a copy or fake tree) and live answers would not match it.
  // `daemon` carries the token and the RPC deadline for GetInfo.
  RealProbes(bool live_devices, gdrstore::ClientOptions daemon)
      : live_devices_(live_devices), daemon_(std::move(daemon)) {}

  absl::StatusOr<PortQuery> QueryPort(const std::string& device, int port) override;
  absl::StatusOr<DcAnswer> ProbeDc(const std::string& device) override;
  Memlock ReadMemlock() override;
  absl::StatusOr<std::vector<CudaGpu>> ListGpus() override;
  absl::StatusOr<gdr::cuda::GpuDirectAttributes> GpuDirect(int ordinal) override;
  absl::StatusOr<std::string> ProbeGpuRegistration(int ordinal, const std::string& device) override;
  absl::StatusOr<DaemonOffer> GetInfo(const std::string& address) override;

 private:
  bool live_devices_;
  gdrstore::ClientOptions daemon_;
};

}  // namespace gdrctl::doctor
