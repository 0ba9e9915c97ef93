// The judgement of `gdrctl doctor`: turns the host's facts (host_facts.h) and live probes
// (probes.h) into result lines, RDMA first, then memlock, GPUs, PCIe, ARP and the daemon.
#pragma once

#include <string>
#include <vector>

#include "client/gdrctl/doctor/check_result.h"
#include "client/gdrctl/doctor/host_facts.h"
#include "client/gdrctl/doctor/probes.h"
#include "common/topo/pci_topology.h"

namespace gdrctl::doctor {

enum class Role { kClient, kStorage };

struct CheckOptions {
  Role role = Role::kClient;
  std::string daemon_address = "127.0.0.1:50051";
  // The address was given on the command line: an unreachable daemon is a FAIL, not a SKIP.
  bool daemon_explicit = false;
  // --rdma-device: the NIC GPU buffers use; empty: the one nearest each GPU (as the client).
  std::string rdma_device;
  // --needs tcp: the host is to move bytes over tcp only (a test cluster's pods), so what only
  // the GPU-direct RDMA path needs (RDMA devices and ports, GPU registration and its NIC, BAR1,
  // PCIe ACS, the IOMMU, ARP) cannot fail or warn: it is reported as SKIP, saying why.
  bool needs_rdma = true;
};

// Every check, in report order. `probes` is called, never stored.
std::vector<CheckResult> RunChecks(const HostFacts& facts, Probes& probes,
                                   const CheckOptions& options);

// nvidia-smi topo's name for a GPU-NIC path: PIX (one PCIe switch between them), PXB (several
// bridges, no host bridge), PHB (through the CPU's host bridge), NODE (between host bridges of
// one NUMA node), SYS (across the inter-socket link).
const char* NvidiaSmiDistance(gdr::topo::Relation relation, int hops);

}  // namespace gdrctl::doctor
