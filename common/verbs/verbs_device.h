// One opened RDMA device port: the context, a protection domain, the port's attributes and the
// GID chosen for RoCE. Selected by device name (rxe0, mlx5_0) or by a local IP address, which
// resolves to the device, port and GID whose RoCE v2 entry carries that address.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/verbs/gid_table.h"
#include "common/verbs/verbs_ptr.h"

namespace gdr::verbs {

struct DeviceSelector {
  std::string device;     // by name; empty: any device
  std::string address;    // by local IP (resolved to device/port/GID); empty: not used
  int port = 0;           // 0: the first ACTIVE port (the address's port when by address)
  int gid_index = -1;     // -1: automatic (RoCE v2, IPv4-mapped first); >= 0 forces it
  // The peer's IP address where known (a client knows the daemon's GID): the automatic GID is
  // then the RoCE v2 entry whose interface shares the peer's subnet, where one does.
  std::string peer_address;
  std::string sysfs_root = "/sys";
};

struct PortInfo {
  uint8_t port = 0;
  ibv_port_state state = IBV_PORT_NOP;
  ibv_mtu active_mtu = IBV_MTU_1024;
  uint32_t max_msg_size = 0;
  uint16_t lid = 0;
  uint8_t link_layer = IBV_LINK_LAYER_UNSPECIFIED;
  int gid_index = 0;
  Gid gid{};
  std::string gid_type;  // "RoCE v2", "IB/RoCE v1", "" on InfiniBand
  std::string netdev;    // interface of the GID; empty on InfiniBand
  uint64_t speed_mbps = 0;  // active speed x width at open; 0: not reported
  // A peer address was given (DeviceSelector::peer_address) and the chosen GID's interface has
  // it on its subnet: this port reaches the peer without a router.
  bool on_peer_subnet = false;
};

class VerbsDevice {
 public:
  // Opens the selected device and port and allocates a PD. NOT_FOUND (one line naming what was
  // looked for and what exists) when nothing matches; FAILED_PRECONDITION when the port is not
  // ACTIVE; the errno status of a failing verbs call otherwise.
  static absl::StatusOr<std::unique_ptr<VerbsDevice>> Open(const DeviceSelector& selector);
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  // Thread-safe accessors; the objects live as long as this VerbsDevice.
  ibv_context* context() const { return context_.get(); }
  ibv_pd* pd() const { return pd_.get(); }
  const std::string& name() const { return name_; }
  const ibv_device_attr& attr() const { return attr_; }
  const PortInfo& port() const { return port_; }
  bool is_roce() const { return port_.link_layer == IBV_LINK_LAYER_ETHERNET; }
  // Current port state (queried again; the cached port() keeps the state at open time).
  ibv_port_state QueryPortState() const;
  // "rxe0 port 1 ACTIVE, Ethernet, MTU 1024, GID[1] 10.11.0.1 (RoCE v2, veth0)"
  std::string Describe() const;

 private:
  VerbsDevice() = default;
  // Members in dependency order: the PD is released before the context closes.
  VerbsPtr<ibv_context> context_;
  VerbsPtr<ibv_pd> pd_;
  std::string name_;
  ibv_device_attr attr_{};
  PortInfo port_;
};

// Every device and port on this host with its state and RoCE v2 addresses, one line, for error
// messages: "rxe0 port 1 (ACTIVE, 10.11.0.1)"; "no RDMA devices" when there is none.
std::string DescribeAllDevices(const std::string& sysfs_root = "/sys");

// Names of the RDMA devices present (empty when none or when libibverbs finds no provider).
std::vector<std::string> ListDeviceNames();

}  // namespace gdr::verbs
