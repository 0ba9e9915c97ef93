// `gdrctl info`: the daemon's version, transports, volumes, limits, TLS, RDMA and rails, and
// this client's side (its RDMA device and rails, or its tcp target).
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/gdrctl/client_rails.h"
#include "client/gdrctl/command.h"
#include "common/base/json.h"
#include "common/base/units.h"
#include "common/wire/transport_kind.h"

namespace gdrctl {
namespace {

using gdr::json::Json;

Json InfoJson(const gdrstore::v1::GetInfoResponse& info, gdrstore::Client& client) {
  Json transports = Json::array(), volumes = Json::array();
  for (const auto& t : info.transports()) {
    transports.push_back(
        {{"name", gdr::TransportName(t.transport())}, {"available", t.available()}});
  }
  for (const auto& v : info.volumes()) volumes.push_back({{"name", v.name()}, {"size", v.size()}});
  const auto& l = info.limits();
  Json doc = {{"version", info.version()},
              {"transports", std::move(transports)},
              {"volumes", std::move(volumes)},
              {"limits",
               {{"max_op_bytes", l.max_op_bytes()},
                {"max_inflight_per_stream", l.max_inflight_per_stream()},
                {"max_inflight_ops", l.max_inflight_ops()},
                {"max_inflight_bytes", l.max_inflight_bytes()},
                {"chunk_bytes", l.chunk_bytes()},
                {"max_links", l.max_links()}}}};
  if (info.has_tls()) {
    const auto& t = info.tls();
    doc["tls"] = {{"enabled", t.enabled()},
                  {"client_certificate_required", t.client_certificate_required()},
                  {"reloads", t.reloads()},
                  {"refused", t.refused()}};
  }
  if (info.has_rdma()) {
    const auto& r = info.rdma();
    doc["rdma"] = {{"device", r.device()},
                   {"port", r.port()},
                   {"port_state", r.port_state()},
                   {"gid_index", r.gid_index()},
                   {"gid", r.gid_address()},
                   {"mtu", r.mtu()},
                   {"rc_qps", r.rc_qps()},
                   {"rc_max_qps", r.rc_max_qps()},
                   {"rc_connections", r.rc_connections()}};
  }
  if (info.rails_size() > 0) {
    Json rails = Json::array();
    for (const auto& r : info.rails()) {
      rails.push_back({{"index", r.index()},
                       {"device", r.device()},
                       {"port", r.port()},
                       {"port_state", r.port_state()},
                       {"serving", r.serving()},
                       {"link_layer", r.link_layer()},
                       {"gid", r.gid_address()},
                       {"speed_mbps", r.speed_mbps()},
                       {"numa_node", r.numa_node()},
                       {"pci", r.pci()}});
    }
    doc["rails"] = std::move(rails);
  }
  if (const gdrstore::TransportInfo t = client.transport_info();
      t.kind == gdrstore::Transport::kLocal) {
    doc["client_local"] = {{"socket", t.local_socket},
                           {"through_agent", t.through_agent},
                           {"description", t.description}};
  }
  if (auto mine = client.transport_info().rdma) {
    doc["client_rdma"] = {{"device", mine->device},
                          {"port", mine->port},
                          {"port_state", mine->port_state},
                          {"gid_index", mine->gid_index},
                          {"gid", mine->gid},
                          {"mtu", mine->mtu},
                          {"qps", mine->qps},
                          {"connection_id", mine->connection_id}};
  }
  // This client's rails. The text this replaced printed them as a second "rails" key after the
  // daemon's, which a JSON reader takes as the value of "rails": they stay what it reads.
  if (Json rails = ClientRailsJson(client); !rails.empty()) doc["rails"] = std::move(rails);
  return doc;
}

// The text a person reads: one section per part, aligned.
void PrintInfoText(const gdrstore::v1::GetInfoResponse& response, gdrstore::Client& client) {
  const gdrstore::v1::GetInfoResponse* info = &response;
  std::cout << "gdrstored " << info->version() << "\n";
  std::cout << "transports:\n";
  for (const auto& t : info->transports()) {
    std::cout << absl::StrFormat("  %-4s %-13s %s\n", gdr::TransportName(t.transport()),
                                 t.available() ? "available" : "unavailable", t.detail());
  }
  std::cout << "volumes:\n";
  for (const auto& v : info->volumes()) {
    std::cout << absl::StrFormat("  %-16s %14u bytes (%s, %s)\n", v.name(), v.size(),
                                 gdr::FormatSize(v.size()), v.backing());
  }
  const auto& l = info->limits();
  std::cout << "limits:\n"
            << "  max op size         " << gdr::FormatSize(l.max_op_bytes()) << "\n"
            << "  chunk size          " << gdr::FormatSize(l.chunk_bytes()) << "\n"
            << "  in flight / stream  " << l.max_inflight_per_stream() << " ops\n"
            << "  in flight / daemon  " << l.max_inflight_ops() << " ops, "
            << gdr::FormatSize(l.max_inflight_bytes()) << "\n"
            << "  tcp links           " << l.max_links() << "\n";
  if (info->tls().enabled()) {
    const auto& t = info->tls();
    std::cout << "tls:\n"
              << "  mode                "
              << (t.client_certificate_required() ? "mTLS (client certificates required)" : "TLS")
              << "\n  certificate         " << t.certificate_subject() << ", valid until "
              << t.certificate_not_after() << "\n  reloads             " << t.reloads()
              << " taken, " << t.refused() << " refused\n";
  }
  if (info->has_rdma()) {
    const auto& r = info->rdma();
    std::cout << "rdma (daemon):\n"
              << absl::StrFormat("  device              %s port %u, %s, %s\n", r.device(), r.port(),
                                 r.port_state(), r.link_layer())
              << absl::StrFormat("  GID index           %u: %s (%s)\n", r.gid_index(),
                                 r.gid_address(), r.gid_type())
              << absl::StrFormat("  MTU                 %u, max message %s\n", r.mtu(),
                                 gdr::FormatSize(r.max_msg_bytes()))
              << absl::StrFormat(
                     "  rc QPs              %u in use of %u (%u per client), %u "
                     "connections, poller %s\n",
                     r.rc_qps(), r.rc_max_qps(), r.rc_max_qps_per_client(), r.rc_connections(),
                     r.poll_mode());
    if (!r.relaxed_ordering().empty()) {
      std::cout << "  relaxed ordering    " << r.relaxed_ordering() << "\n";
    }
  }
  if (info->rails_size() > 0) {
    // One line per rail: a rail that is not serving takes no new work until its port is ACTIVE.
    std::cout << "rails (daemon):\n"
              << absl::StrFormat("  %-3s %-12s %-4s %-8s %-7s %-10s %-24s %-10s %-4s %s\n", "#",
                                 "device", "port", "state", "serving", "link", "GID address",
                                 "speed", "NUMA", "PCI");
    for (const auto& r : info->rails()) {
      const std::string speed =
          r.speed_mbps() == 0 ? "-"
          : r.speed_mbps() % 1000 == 0
              ? absl::StrCat(r.speed_mbps() / 1000, " Gb/s")
              : absl::StrFormat("%.1f Gb/s", static_cast<double>(r.speed_mbps()) / 1000);
      std::cout << absl::StrFormat(
          "  %-3u %-12s %-4u %-8s %-7s %-10s %-24s %-10s %-4s %s\n", r.index(), r.device(),
          r.port(), r.port_state(), r.serving() ? "yes" : "no", r.link_layer(),
          r.gid_address().empty() ? "-" : r.gid_address(), speed,
          r.numa_node() >= 0 ? absl::StrCat(r.numa_node()) : "-", r.pci().empty() ? "-" : r.pci());
    }
  }
  if (auto mine = client.transport_info().rdma) {
    std::cout << "rdma (this client):\n"
              << absl::StrFormat("  device              %s port %u, %s\n", mine->device, mine->port,
                                 mine->port_state)
              << absl::StrFormat("  GID index           %d: %s\n", mine->gid_index, mine->gid)
              << absl::StrFormat("  MTU                 %u\n", mine->mtu)
              << absl::StrFormat("  rc connection       %u: %u QPs to %s\n", mine->connection_id,
                                 mine->qps, mine->daemon_device);
    std::cout << ClientRailsText(client);
  } else if (const gdrstore::TransportInfo t = client.transport_info();
             t.kind == gdrstore::Transport::kLocal) {
    std::cout << (t.through_agent ? "client (agent):     " : "client (local):     ")
              << t.description << "\n";
  } else {
    std::cout << "client tcp target:  " << t.target_host << ":" << t.target_port << "\n";
  }
}

class InfoCommand final : public Command {
 public:
  CLI::App* Register(CLI::App& app) override {
    return app.add_subcommand("info", "daemon version, transports, volumes, limits");
  }

  int Run(const Context& ctx) override {
    return ctx.target.WithClient([&](gdrstore::Client& client) {
      auto info = client.GetInfo(std::chrono::milliseconds(ctx.global.timeout_ms));
      if (!info.ok()) return Fail(info.status(), "GetInfo");
      if (ctx.global.json) {
        std::cout << gdr::json::Dump(InfoJson(*info, client)) << "\n";
        return kExitOk;
      }
      PrintInfoText(*info, client);
      return kExitOk;
    });
  }
};

}  // namespace

std::unique_ptr<Command> NewInfoCommand() { return std::make_unique<InfoCommand>(); }

}  // namespace gdrctl
