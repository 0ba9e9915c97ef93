#include "common/verbs/verbs_device.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "common/verbs/port_speed.h"
#include "common/verbs/verbs_status.h"

namespace gdr::verbs {
namespace {

struct DeviceList {
  VerbsPtr<ibv_device*> list;
  int count = 0;
};

DeviceList GetDevices() {
  DeviceList d;
  d.list.reset(ibv_get_device_list(&d.count));
  if (!d.list) d.count = 0;
  return d;
}

// True when `ip` is assigned to an interface of this host.
bool IsLocalAddress(const Gid& want) {
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return false;
  bool found = false;
  for (ifaddrs* p = ifa; p && !found; p = p->ifa_next) {
    if (!p->ifa_addr) continue;
    Gid g{};
    if (p->ifa_addr->sa_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(p->ifa_addr);
      g[10] = g[11] = 0xff;
      std::memcpy(g.data() + 12, &sin->sin_addr, 4);
    } else if (p->ifa_addr->sa_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(p->ifa_addr);
      std::memcpy(g.data(), &sin6->sin6_addr, 16);
    } else {
      continue;
    }
    found = g == want;
  }
  freeifaddrs(ifa);
  return found;
}

// Every IPv4 address of this host's interfaces with its prefix, for the GID choice by peer.
std::vector<LocalIpv4> LocalIpv4Addresses() {
  std::vector<LocalIpv4> out;
  ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) != 0) return out;
  for (ifaddrs* p = ifa; p; p = p->ifa_next) {
    if (!p->ifa_addr || p->ifa_addr->sa_family != AF_INET || !p->ifa_name) continue;
    LocalIpv4 l;
    l.netdev = p->ifa_name;
    const auto* sin = reinterpret_cast<const sockaddr_in*>(p->ifa_addr);
    std::memcpy(l.addr.data(), &sin->sin_addr, 4);
    l.prefix_len = 32;
    if (p->ifa_netmask) {
      const auto* mask = reinterpret_cast<const sockaddr_in*>(p->ifa_netmask);
      l.prefix_len = __builtin_popcount(mask->sin_addr.s_addr);
    }
    out.push_back(std::move(l));
  }
  freeifaddrs(ifa);
  return out;
}

// The port's GID table through ibv_query_gid_ex (rdma-core >= 36), which reports each entry's
// type and netdev without parsing sysfs; ENODATA marks an empty slot. Errors other than that
// (an old kernel without the GID table query) leave the caller to read sysfs instead.
absl::StatusOr<std::vector<GidEntry>> QueryGidTable(ibv_context* ctx, uint8_t port,
                                                    int table_len) {
  std::vector<GidEntry> table;
  for (int i = 0; i < table_len; ++i) {
    ibv_gid_entry entry{};
    const int rc = ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(i), &entry, 0);
    if (rc == ENODATA) continue;
    if (rc != 0) {
      return VerbsError(rc, "ibv_query_gid_ex", absl::StrCat("port ", port, " index ", i));
    }
    GidEntry e;
    e.index = i;
    std::memcpy(e.gid.data(), entry.gid.raw, 16);
    if (std::all_of(e.gid.begin(), e.gid.end(), [](uint8_t b) { return b == 0; })) continue;
    switch (entry.gid_type) {
      case IBV_GID_TYPE_ROCE_V2:
        e.type = "RoCE v2";
        break;
      case IBV_GID_TYPE_IB:
      case IBV_GID_TYPE_ROCE_V1:
        e.type = "IB/RoCE v1";  // the text sysfs gives both
        break;
    }
    char name[IF_NAMESIZE] = {};
    if (entry.ndev_ifindex != 0 && if_indextoname(entry.ndev_ifindex, name) != nullptr) {
      e.netdev = name;
    }
    table.push_back(std::move(e));
  }
  return table;
}

std::string LinkLayerName(uint8_t ll) {
  switch (ll) {
    case IBV_LINK_LAYER_ETHERNET: return "Ethernet";
    case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
    default: return "unspecified link layer";
  }
}

}  // namespace

std::vector<std::string> ListDeviceNames() {
  DeviceList d = GetDevices();
  std::vector<std::string> names;
  for (int i = 0; i < d.count; ++i) names.push_back(ibv_get_device_name(d.list.get()[i]));
  return names;
}

std::string DescribeAllDevices(const std::string& sysfs_root) {
  DeviceList d = GetDevices();
  if (d.count == 0) return "no RDMA devices";
  std::vector<std::string> parts;
  for (int i = 0; i < d.count; ++i) {
    const std::string name = ibv_get_device_name(d.list.get()[i]);
    VerbsPtr<ibv_context> ctx(ibv_open_device(d.list.get()[i]));
    ibv_device_attr attr{};
    if (!ctx || ibv_query_device(ctx.get(), &attr) != 0) {
      parts.push_back(absl::StrCat(name, " (cannot open)"));
      continue;
    }
    for (int p = 1; p <= attr.phys_port_cnt; ++p) {
      ibv_port_attr pa{};
      if (ibv_query_port(ctx.get(), static_cast<uint8_t>(p), &pa) != 0) continue;
      std::vector<std::string> addrs;
      if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
        auto table = ReadGidTable(sysfs_root, name, p, pa.gid_tbl_len);
        if (table.ok()) {
          for (const GidEntry& e : *table) {
            if (absl::EqualsIgnoreCase(e.type, "RoCE v2")) addrs.push_back(DescribeGid(e.gid));
          }
        }
      } else {
        addrs.push_back(absl::StrCat("LID ", pa.lid));
      }
      parts.push_back(absl::StrCat(name, " port ", p, " (", PortStateName(pa.state),
                                   addrs.empty() ? "" : ", ", absl::StrJoin(addrs, ", "), ")"));
    }
  }
  return absl::StrJoin(parts, "; ");
}

absl::StatusOr<std::unique_ptr<VerbsDevice>> VerbsDevice::Open(const DeviceSelector& sel) {
  std::optional<Gid> want;
  if (!sel.address.empty()) {
    GDR_ASSIGN_OR_RETURN(Gid g, GidForIp(sel.address));
    if (!IsLocalAddress(g)) {
      return absl::NotFoundError(absl::StrCat("RDMA address ", sel.address,
                                              " is not assigned to any interface of this host "
                                              "(RDMA devices: ", DescribeAllDevices(sel.sysfs_root),
                                              ")"));
    }
    want = g;
  }
  DeviceList devices = GetDevices();
  if (devices.count == 0) {
    return absl::NotFoundError(absl::StrCat(
        "no RDMA devices on this host (looked for ",
        sel.device.empty() ? (sel.address.empty() ? "any device" : "address " + sel.address)
                           : "device '" + sel.device + "'",
        "; load a driver, or for SoftRoCE: rdma link add rxe0 type rxe netdev IFACE)"));
  }
  std::vector<std::string> tried;
  for (int i = 0; i < devices.count; ++i) {
    ibv_device* dev = devices.list.get()[i];
    const std::string name = ibv_get_device_name(dev);
    if (!sel.device.empty() && name != sel.device) continue;
    auto d = std::unique_ptr<VerbsDevice>(new VerbsDevice());
    d->name_ = name;
    d->context_.reset(ibv_open_device(dev));
    if (!d->context_) return VerbsError(errno, "ibv_open_device", name);
    if (ibv_query_device(d->context(), &d->attr_) != 0) {
      return VerbsError(errno, "ibv_query_device", name);
    }
    for (int p = 1; p <= d->attr_.phys_port_cnt; ++p) {
      if (sel.port != 0 && p != sel.port) continue;
      ibv_port_attr pa{};
      if (ibv_query_port(d->context(), static_cast<uint8_t>(p), &pa) != 0) {
        return VerbsError(errno, "ibv_query_port", absl::StrCat(name, " port ", p));
      }
      PortInfo info;
      info.port = static_cast<uint8_t>(p);
      info.state = pa.state;
      info.active_mtu = pa.active_mtu;
      info.max_msg_size = pa.max_msg_sz;
      info.lid = pa.lid;
      info.link_layer = pa.link_layer;
      info.speed_mbps = PortSpeedMbps(pa.active_speed, pa.active_width);
      // sysfs when the query is not there (and for tests with a fake sysfs tree).
      absl::StatusOr<std::vector<GidEntry>> table =
          sel.sysfs_root == "/sys"
              ? QueryGidTable(d->context(), static_cast<uint8_t>(p), pa.gid_tbl_len)
              : absl::StatusOr<std::vector<GidEntry>>(absl::UnimplementedError("fake sysfs"));
      if (!table.ok()) table = ReadGidTable(sel.sysfs_root, name, p, pa.gid_tbl_len);
      if (pa.link_layer == IBV_LINK_LAYER_ETHERNET || want) {
        if (!table.ok()) return table.status();
        if (sel.gid_index >= 0) {
          info.gid_index = sel.gid_index;
        } else {
          GidPick pick;
          pick.want = want;
          if (absl::StatusOr<Gid> peer = GidForIp(sel.peer_address);
              !sel.peer_address.empty() && peer.ok()) {
            pick.peer = *peer;
            pick.local = LocalIpv4Addresses();
          }
          absl::StatusOr<int> idx = PickRoceV2Gid(*table, pick);
          if (!idx.ok()) {
            tried.push_back(absl::StrCat(name, " port ", p, ": ", idx.status().message()));
            continue;  // by address: another port or device may carry it
          }
          info.gid_index = *idx;
          if (pick.peer) {
            for (const GidEntry& e : *table) {
              if (e.index == *idx) info.on_peer_subnet = OnPeerSubnet(e, *pick.peer, pick.local);
            }
          }
        }
      } else {
        info.gid_index = sel.gid_index >= 0 ? sel.gid_index : 0;
      }
      ibv_gid gid{};
      if (ibv_query_gid(d->context(), info.port, info.gid_index, &gid) != 0) {
        return VerbsError(errno, "ibv_query_gid",
                          absl::StrCat(name, " port ", p, " index ", info.gid_index));
      }
      std::memcpy(info.gid.data(), gid.raw, 16);
      if (table.ok()) {
        for (const GidEntry& e : *table) {
          if (e.index != info.gid_index) continue;
          info.gid_type = e.type;
          info.netdev = e.netdev;
        }
      }
      if (want && info.gid != *want) {
        tried.push_back(absl::StrCat(name, " port ", p));
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) {
        if (sel.port == 0 && !want) {
          tried.push_back(absl::StrCat(name, " port ", p, " (", PortStateName(pa.state), ")"));
          continue;
        }
        return absl::FailedPreconditionError(absl::StrCat(
            name, " port ", p, " is ", PortStateName(pa.state), ", not ACTIVE"));
      }
      d->port_ = info;
      d->pd_.reset(ibv_alloc_pd(d->context()));
      if (!d->pd_) return VerbsError(errno, "ibv_alloc_pd", name);
      return d;
    }
  }
  std::string looked_for;
  if (!sel.device.empty()) absl::StrAppend(&looked_for, "device '", sel.device, "'");
  if (sel.port != 0) absl::StrAppend(&looked_for, " port ", sel.port);
  if (want) absl::StrAppend(&looked_for, looked_for.empty() ? "" : " with ", "a RoCE v2 GID for ", sel.address);
  if (looked_for.empty()) looked_for = "an ACTIVE port";
  return absl::NotFoundError(absl::StrCat(
      "no RDMA device matches ", looked_for, " (RDMA devices: ", DescribeAllDevices(sel.sysfs_root),
      ")", tried.empty() ? "" : "; passed over: ", absl::StrJoin(tried, "; ")));
}

ibv_port_state VerbsDevice::QueryPortState() const {
  ibv_port_attr pa{};
  if (ibv_query_port(context(), port_.port, &pa) != 0) return IBV_PORT_NOP;
  return pa.state;
}

std::string VerbsDevice::Describe() const {
  return absl::StrCat(name_, " port ", port_.port, " ", PortStateName(QueryPortState()), ", ",
                      LinkLayerName(port_.link_layer), ", MTU ", MtuBytes(port_.active_mtu),
                      ", GID[", port_.gid_index, "] ", DescribeGid(port_.gid),
                      port_.gid_type.empty() ? "" : " (" + port_.gid_type,
                      port_.netdev.empty() ? "" : ", " + port_.netdev,
                      port_.gid_type.empty() ? "" : ")");
}

}  // namespace gdr::verbs
