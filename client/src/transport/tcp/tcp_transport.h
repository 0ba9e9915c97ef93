// The client side of the tcp transport: the in-process target the daemon's links connect to,
// and the address the daemon is told to reach it at.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/src/transport/client_transport.h"
#include "client/src/transport/tcp/tcp_target.h"
#include "gdrstore/types.h"

namespace gdr {

class TcpTransport final : public ClientTransport {
 public:
  // Starts the target on options->target_host (filled in when empty: 127.0.0.1 for a daemon
  // on loopback, else this host's address on the route to the daemon). INVALID_ARGUMENT for a
  // bad daemon address, UNAVAILABLE when the target cannot listen.
  static absl::StatusOr<std::shared_ptr<TcpTransport>> Open(gdrstore::ClientOptions* options);
  ~TcpTransport() override;  // Close()

  // Registers with the target under a fresh random rkey; withdrawn when the Buffer goes.
  absl::StatusOr<std::function<void()>> Register(const std::shared_ptr<Region>& region) override;
  // GPU memory is staged through pinned slots: INVALID_ARGUMENT for a ring that cannot work.
  absl::Status CanServeGpuMemory() const override;
  void DescribeEndpoint(gdrstore::v1::RemoteBuffer* buffer) const override;
  // GPU memory also asks for pieces of its staging slot's size (TcpEndpoint.chunk_bytes), so
  // each staging copy is one full slot.
  void DescribeEndpoint(const Region& region, int rail,
                        gdrstore::v1::RemoteBuffer* buffer) const override;
  uint32_t inline_max() const override { return inline_max_; }
  // Stops the target: the daemon's links see EOF.
  void Close() override;
  // tcp, "tcp target HOST:PORT", the target's address and counters.
  std::string HopTo(const Region& region, int rail) const override;
  void FillInfo(gdrstore::TransportInfo* info) const override;
  // Every daemon reaches the one target (Attach's default: nullptr).

 private:
  TcpTransport(std::shared_ptr<TcpTarget> target, std::string host, GpuStagingOptions staging,
               uint32_t inline_max)
      : target_(std::move(target)), host_(std::move(host)), staging_(staging),
        inline_max_(inline_max) {}

  // Shared with every Buffer registered here, so a Buffer that outlives the Client still
  // deregisters from a live target.
  std::shared_ptr<TcpTarget> target_;
  std::string host_;
  GpuStagingOptions staging_;
  uint32_t inline_max_;  // ClientOptions::tcp_inline_max
};

}  // namespace gdr
