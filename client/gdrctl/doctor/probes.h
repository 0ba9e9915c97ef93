// The seam between `gdrctl doctor` and everything it must ask live rather than read from files:
// verbs (port query, DC probe), the process's memlock limit, CUDA (GPU list, GPUDirect RDMA
// attributes, a GPU memory registration on an RDMA device) and the daemon (GetInfo). RealProbes (real_probes.h) makes the
// calls; tests hand the checks a fake.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cuda/gpu_direct.h"

namespace gdrctl::doctor {

struct PortQuery {
  int active_mtu = 0;  // bytes
  int max_mtu = 0;     // bytes
};

struct DcAnswer {
  bool mlx5 = false;
  bool dc = false;
  std::string why_not;  // verbs::DcProbe::why_not
};

struct Memlock {
  bool unlimited = false;
  uint64_t soft_bytes = 0;  // when !unlimited
  uint64_t hard_bytes = 0;  // UINT64_MAX when the hard limit is unlimited
  bool cap_ipc_lock = false;  // CAP_IPC_LOCK in the effective set: the limit does not apply
};

struct CudaGpu {
  int ordinal = -1;
  std::string pci;  // canonical "0000:b7:00.0"
  std::string name;
  uint64_t total_bytes = 0;
  bool dma_buf = false;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
};

struct DaemonTransport {
  std::string name;  // "tcp", "rc", "dc"
  bool available = false;
  std::string detail;
};

struct DaemonOffer {
  std::string version;
  std::vector<DaemonTransport> transports;
  bool has_rdma = false;
  std::string rdma_device;
  int rdma_port = 0;
  std::string port_state;
  std::string link_layer;
  std::string gid;
  int mtu = 0;
};

class Probes {
 public:
  virtual ~Probes() = default;
  // ibv_query_port of `device` port `port`. UNAVAILABLE when verbs cannot open the device (not
  // on this host, no provider, or live probes are off); the checks then derive from sysfs.
  virtual absl::StatusOr<PortQuery> QueryPort(const std::string& device, int port) = 0;
  // verbs::ProbeDc on `device`. An error when the device cannot be opened (no ACTIVE port...).
  virtual absl::StatusOr<DcAnswer> ProbeDc(const std::string& device) = 0;
  virtual Memlock ReadMemlock() = 0;
  // The GPUs the CUDA driver sees; FAILED_PRECONDITION naming why there are none.
  virtual absl::StatusOr<std::vector<CudaGpu>> ListGpus() = 0;
  // cuda::ReadGpuDirectAttributes of GPU `ordinal`.
  virtual absl::StatusOr<gdr::cuda::GpuDirectAttributes> GpuDirect(int ordinal) = 0;
  // Allocates a little device memory on GPU `ordinal` and registers it on `device` the way the
  // client does (dma-buf, then nvidia-peermem); answers the method that worked ("dma-buf",
  // "nvidia-peermem") or why neither did.
  virtual absl::StatusOr<std::string> ProbeGpuRegistration(int ordinal,
                                                           const std::string& device) = 0;
  // GetInfo of the daemon at HOST:PORT; the gRPC status as an absl::Status when unreachable.
  virtual absl::StatusOr<DaemonOffer> GetInfo(const std::string& address) = 0;
};

}  // namespace gdrctl::doctor
