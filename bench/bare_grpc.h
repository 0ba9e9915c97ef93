// The gRPC library's own round trip on this host, with no daemon behind it: a minimal server in
// this process that answers GdrStore.Ping and nothing else, pinged through a plain stub. It is
// the floor under every RPC the product makes (the lat group's info line), measured in the same
// run as the product's Ping.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grpc {
class Server;
}

namespace gdrbench {

class BareGrpcServer {
 public:
  // Listens on 127.0.0.1, a port the kernel picks.
  static absl::StatusOr<std::unique_ptr<BareGrpcServer>> Start();
  ~BareGrpcServer();

  const std::string& address() const { return address_; }

 private:
  struct Service;
  BareGrpcServer();
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

// `ops` empty Pings to `address` over the callback API, the next issued from the previous
// one's completion (as gdr_bench chains the product's). Per-call latency, ns.
absl::StatusOr<std::vector<uint64_t>> BarePingLoop(const std::string& address, uint64_t ops);

}  // namespace gdrbench
