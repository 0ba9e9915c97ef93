// The one interface the Client talks to for the transport it runs on: how memory becomes
// reachable by the daemon, how a request's descriptor names it, and what there is to show.
// tcp/, rc/ and dc/ each implement it; OpenClientTransport is the one place that picks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/src/transport/region.h"
#include "gdrstore/types.h"
#include "gdrstore/v1/gdrstore.grpc.pb.h"
#include "gdrstore/v1/gdrstore.pb.h"

namespace gdr {

class ClientTransport {
 public:
  virtual ~ClientTransport() = default;

  // Makes `region` (base, size and host or gpu set) reachable by the daemon and sets its rkey.
  // Returns what withdraws it (run when the Buffer goes; may be empty when the registration
  // ends with the region itself). The registration's error otherwise (e.g. RESOURCE_EXHAUSTED
  // for a memlock limit, FAILED_PRECONDITION for GPU memory the NIC cannot reach).
  // Thread-safe.
  virtual absl::StatusOr<std::function<void()>> Register(const std::shared_ptr<Region>& region) = 0;
  // OK when GPU memory can be served at all, checked before any is allocated.
  virtual absl::Status CanServeGpuMemory() const { return absl::OkStatus(); }
  // Fills the endpoint (the oneof) of a descriptor for this process's memory.
  virtual void DescribeEndpoint(gdrstore::v1::RemoteBuffer* buffer) const = 0;
  // The largest Write this process's own unary calls take answered inline (tcp:
  // TcpEndpoint.inline_max); 0: none. Never in a descriptor (DescribeEndpoint): whoever sends
  // the request gets the bytes, so only the memory's owner may ask for them.
  virtual uint32_t inline_max() const { return 0; }
  // Ends what the transport holds open (tcp: the target's links; rc: the Connect call).
  // Ops still running fail. Idempotent.
  virtual void Close() = 0;
  // OK while the transport can carry ops; once it cannot (its session with the daemon has
  // ended), why. A rail set leaves such a rail out.
  virtual absl::Status session_status() const { return absl::OkStatus(); }

  // Rails: a transport over several RDMA devices (RailSet) cuts an op into slices, one per
  // rail it goes to. The defaults are the one-rail answer: the whole op on rail 0.
  struct Slice {
    uint64_t offset = 0;  // from the op's start
    uint64_t length = 0;
    int rail = 0;
  };
  virtual int rail_count() const { return 1; }
  virtual std::vector<Slice> Plan(const Region& region, uint64_t length) {
    return {Slice{0, length, 0}};
  }
  // The descriptor's endpoint and rkey for `region` on `rail`.
  virtual void DescribeEndpoint(const Region& region, int rail,
                                gdrstore::v1::RemoteBuffer* buffer) const {
    buffer->set_rkey(region.rkey);
    DescribeEndpoint(buffer);
  }
  // A slice on `failed` ended with `why` (a status a retry elsewhere may cure): the rail to
  // resubmit it on once, or nullopt when there is none.
  virtual std::optional<int> Reroute(int failed, const absl::Status& why) { return std::nullopt; }
  // What a slice on `rail` did, for rail_stats.
  virtual void Record(int rail, uint64_t bytes, bool ok, bool resubmitted) {}

  // This process's hop to `region` on `rail`, the first of every op's path (op_path.h: Hop).
  virtual std::string HopTo(const Region& region, int rail) const = 0;

  // For display: fills this transport's part of `info` (its kind, a line describing it, and
  // its fields); the rest keeps its defaults.
  virtual void FillInfo(gdrstore::TransportInfo* info) const {}

  // The way for another daemon (reached through `stub`, which must outlive what is returned)
  // to this process's memory, sharing what this transport holds: the tcp target, the device and
  // every registration made on it. The cluster client reaches all its members so. nullptr: this
  // transport serves any daemon as it is (tcp, dc: nothing is connected). rc connects new QPs
  // on the same device through `stub`'s Connect. Close on what is returned ends only what was
  // opened for that daemon. The errors of opening that (rc's Connect).
  virtual absl::StatusOr<std::shared_ptr<ClientTransport>> Attach(
      gdrstore::v1::GdrStore::Stub* stub) {
    return nullptr;
  }
};

}  // namespace gdr
