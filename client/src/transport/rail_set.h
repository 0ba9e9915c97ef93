// Several RDMA devices ("rails") behind the one ClientTransport interface: a session per rail
// (each paired with a daemon rail), every buffer registered on all of them, and the rail each
// slice of an op goes to: small ops to a rail nearest their memory (round robin among equals),
// large ones cut into slices spread over the rails in proportion to their speed. A rail whose
// slice failed is passed over for a while and then tried again.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "client/src/transport/client_transport.h"
#include "common/topo/pci_topology.h"

namespace gdr {

class RailSet final : public ClientTransport {
 public:
  struct Rail {
    std::shared_ptr<ClientTransport> session;
    std::string device;       // local device name
    std::string daemon_rail;  // the daemon device and port it is paired with
    uint64_t speed_mbps = 0;  // 0: unknown (counts as the slowest known one)
  };
  struct Options {
    size_t slice_bytes = 1 << 20;
    std::chrono::milliseconds retry{1000};
    std::string sysfs_root = "/sys";
    std::string notes;  // rails asked for and left out, for display
  };
  // `rails` must not be empty.
  RailSet(std::vector<Rail> rails, Options options);
  ~RailSet() override;

  absl::StatusOr<std::function<void()>> Register(const std::shared_ptr<Region>& region) override;
  absl::Status CanServeGpuMemory() const override;
  void DescribeEndpoint(gdrstore::v1::RemoteBuffer* buffer) const override;
  void DescribeEndpoint(const Region& region, int rail,
                        gdrstore::v1::RemoteBuffer* buffer) const override;
  void Close() override;

  int rail_count() const override { return static_cast<int>(rails_.size()); }
  std::vector<Slice> Plan(const Region& region, uint64_t length) override;
  std::optional<int> Reroute(int failed, const absl::Status& why) override;
  void Record(int rail, uint64_t bytes, bool ok, bool resubmitted) override;
  std::vector<gdrstore::RailStats> rail_stats() const;
  // The first rail's info (kind, rdma), then the rails, their notes and a line naming them.
  std::string HopTo(const Region& region, int rail) const override;
  void FillInfo(gdrstore::TransportInfo* info) const override;
  // A rail set toward another daemon: each rail's session attached (rc: a Connect of its own
  // on the same device, to the daemon rail of the same name), counters of its own.
  absl::StatusOr<std::shared_ptr<ClientTransport>> Attach(
      gdrstore::v1::GdrStore::Stub* stub) override;

 private:
  struct Counters {
    std::atomic<uint64_t> ops{0}, bytes{0}, errors{0}, resubmitted{0};
    std::atomic<int64_t> passed_over_until_ns{0};  // steady clock
  };
  // Rails not passed over now; every rail when all are (the daemon then says why).
  std::vector<int> Usable(int64_t now_ns) const;
  // The rails nearest memory on the GPU with PCI address `gpu_pci`, best relation first.
  std::vector<int> NearestTo(const std::string& gpu_pci) const;

  const std::vector<Rail> rails_;
  const Options options_;
  std::vector<uint64_t> weights_;  // striping weight per rail
  std::unique_ptr<Counters[]> counters_;
  std::atomic<uint64_t> round_robin_{0};
  absl::StatusOr<topo::Topology> topology_;
};

}  // namespace gdr
