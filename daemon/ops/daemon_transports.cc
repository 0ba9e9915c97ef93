// Daemon::MakeTransports: the one place that names the transports. It opens the rails (RDMA
// device ports) the verbs transports need, builds each transport the configuration asks for
// into the TransportSet, and from then on the daemon sees them only through the set. The layer
// check lets this file, and no other above the transports, include a transport's own headers.
#include "absl/strings/str_cat.h"
#include "common/base/log.h"
#include "daemon/ops/daemon.h"
#include "daemon/transport/dc/dc_transport.h"
#include "daemon/transport/local/local_initiator.h"
#include "daemon/transport/rc/rc_connect_service.h"
#include "daemon/transport/rc/rc_initiator.h"
#include "daemon/transport/tcp/tcp_initiator.h"

namespace gdr {

absl::Status Daemon::MakeTransports() {
  std::string core_detail = "no transport asked for an RDMA device (--rc off, --dc off)";
  if (config_.WantsRdmaDevice()) {
    absl::StatusOr<std::unique_ptr<RailSet>> opened = RailSet::Open(config_.verbs, *store_);
    if (opened.ok()) {
      rails_ = std::move(*opened);
    } else if (config_.dc.mode == dc::DcTransportConfig::Mode::kOn &&
               config_.rc_mode != DaemonConfig::RcMode::kOn) {
      return absl::Status(opened.status().code(),
                          absl::StrCat("transport dc needs an RDMA device, and none opens: ",
                                       opened.status().message()));
    } else if (config_.NeedsRdmaDevice()) {
      return opened.status();
    } else {
      core_detail = std::string(opened.status().message());
    }
  }
  transports_ = std::make_unique<TransportSet>();
  {
    absl::StatusOr<std::unique_ptr<TcpInitiator>> tcp = TcpInitiator::Create(config_.tcp);
    if (!tcp.ok()) return tcp.status();
    transports_->Add(std::move(*tcp));
  }
  if (config_.rc_mode == DaemonConfig::RcMode::kOff) {
    transports_->SetAbsent(TransportKind::kRc, "disabled by configuration (--rc off)");
  } else if (rails_ == nullptr) {
    transports_->SetAbsent(TransportKind::kRc, core_detail);
  } else {
    absl::StatusOr<std::unique_ptr<RcInitiator>> rc = RcInitiator::Create(config_.rc, rails_.get());
    if (!rc.ok()) return rc.status();
    rc_connect_ = std::make_unique<RcConnectService>(rc->get());
    transports_->Add(std::move(*rc));
  }
  // dc runs on the first rail only: its DCIs and the address handles they cache are per device.
  absl::StatusOr<dc::DcStart> dc =
      dc::StartDcTransport(config_.dc, rails_ ? rails_->first() : nullptr, core_detail,
                           config_.limits.max_op_bytes, config_.rc.chunk_bytes);
  if (!dc.ok()) return dc.status();
  if (dc->initiator) {
    transports_->Add(std::move(dc->initiator));
  } else {
    transports_->SetAbsent(TransportKind::kDc, dc->detail);
  }
  // local: on where a socket is named. It loads CUDA only when a GPU handle arrives, so it
  // starts on hosts without a driver.
  if (config_.local.socket_path.empty()) {
    transports_->SetAbsent(TransportKind::kLocal, "off (no --local-socket)");
  } else {
    absl::StatusOr<std::unique_ptr<LocalInitiator>> local =
        LocalInitiator::Create(config_.local, store_.get(), "gdrstored " GDR_VERSION);
    if (!local.ok()) return local.status();
    transports_->Add(std::move(*local));
  }
  // Devices no transport runs on are closed again: GetInfo shows a device only where one works.
  if (rails_ != nullptr && transports_->Find(TransportKind::kRc) == nullptr &&
      transports_->Find(TransportKind::kDc) == nullptr) {
    rails_.reset();
  }
  transports_->set_rails(rails_.get());
  for (TransportKind k : kTransportKinds) {
    GDR_LOG(kInfo) << TransportName(k)
                   << (transports_->Find(k) != nullptr ? ": " : " not offered: ")
                   << transports_->Describe(k);
  }
  GDR_LOG(kInfo) << "transports: " << transports_->Names();
  return absl::OkStatus();
}

}  // namespace gdr
