#include "client/src/transport/dc/dc_session.h"

#include "client/src/transport/verbs_registration.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "client/src/transport/op_path.h"
#include "common/verbs/verbs_status.h"
#include "common/base/status_macros.h"

namespace gdr {

namespace v1 = gdrstore::v1;

absl::Status ApplyDaemonDcInfo(const v1::DcInfo& info, DcSessionOptions* options) {
  ibv_mtu mtu;
  if (info.mtu() != 0 && !verbs::MtuFromBytes(info.mtu(), &mtu).ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the daemon's GetInfo rdma.dc.mtu ", info.mtu(),
        " is not a path MTU (256, 512, 1024, 2048, 4096)"));
  }
  if (info.traffic_class() > 255) {
    return absl::InvalidArgumentError(absl::StrCat("the daemon's GetInfo rdma.dc.traffic_class ",
                                                   info.traffic_class(), " is not 0..255"));
  }
  if (info.service_level() > 15) {
    return absl::InvalidArgumentError(absl::StrCat("the daemon's GetInfo rdma.dc.service_level ",
                                                   info.service_level(), " is not 0..15"));
  }
  if (info.hop_limit() > 255) {
    return absl::InvalidArgumentError(absl::StrCat("the daemon's GetInfo rdma.dc.hop_limit ",
                                                   info.hop_limit(), " is not 1..255"));
  }
  options->daemon_mtu = info.mtu();
  options->dct.traffic_class = static_cast<uint8_t>(info.traffic_class());
  options->dct.service_level = static_cast<uint8_t>(info.service_level());
  // 0: a daemon that does not say; keep ours.
  if (info.hop_limit() != 0) options->dct.hop_limit = static_cast<uint8_t>(info.hop_limit());
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<DcSession>> DcSession::Open(const DcSessionOptions& options) {
  std::shared_ptr<DcSession> s(new DcSession());
  absl::StatusOr<std::unique_ptr<verbs::VerbsDevice>> dev =
      verbs::VerbsDevice::Open(options.device);
  if (!dev.ok()) return dev.status();
  s->device_ = std::move(*dev);
  // A small CQ for the DCT: one-sided traffic to a DCT produces no completions here.
  s->cq_.reset(ibv_create_cq(s->device_->context(), 16, nullptr, nullptr, 0));
  if (!s->cq_) return verbs::VerbsError(errno, "ibv_create_cq", "(for the DCT)");
  // The same capability check the daemon makes, so that the error names what is missing.
  const verbs::DcProbe probe = verbs::ProbeDc(*s->device_, s->cq_.get());
  if (!probe.mlx5 || !probe.dc) {
    return absl::FailedPreconditionError(absl::StrCat("transport dc: ", probe.why_not));
  }
  absl::StatusOr<uint64_t> key = verbs::RandomDcKey();
  if (!key.ok()) return key.status();
  s->key_ = *key;
  // The DCT's responses are cut at its path MTU; the daemon's DCIs expect theirs.
  verbs::DctConfig dct_config = options.dct;
  dct_config.path_mtu = verbs::DctPathMtu(s->device_->port().active_mtu, options.daemon_mtu);
  s->mtu_bytes_ = verbs::MtuBytes(*dct_config.path_mtu);
  absl::StatusOr<verbs::DcTargetQp> dct =
      verbs::CreateDct(*s->device_, s->cq_.get(), s->key_, dct_config);
  if (!dct.ok()) return dct.status();
  s->dct_ = std::move(*dct);
  return s;
}

absl::StatusOr<std::function<void()>> DcSession::Register(const std::shared_ptr<Region>& region) {
  GDR_RETURN_IF_ERROR(RegisterOnDevice(*device_, shared_from_this(), *region));
  return std::function<void()>();
}

void DcSession::DescribeEndpoint(v1::RemoteBuffer* buffer) const {
  v1::DcEndpoint* e = buffer->mutable_dc();
  e->set_dct_number(dct_.dct_number);
  e->set_dc_key(key_);
  const verbs::Gid& gid = device_->port().gid;
  e->set_gid(std::string(reinterpret_cast<const char*>(gid.data()), gid.size()));
  e->set_lid(device_->port().lid);
  e->set_mtu(mtu_bytes_);
}

std::string DcSession::HopTo(const Region& region, int rail) const {
  return Hop("dc", device_->name(), region);
}

void DcSession::FillInfo(gdrstore::TransportInfo* info) const {
  info->kind = gdrstore::Transport::kDc;
  info->dct_number = dct_.dct_number;
  info->description = absl::StrCat("dc: DCT 0x", absl::Hex(dct_.dct_number, absl::kZeroPad6),
                                   " on ", device_->name(), " port ",
                                   static_cast<uint32_t>(device_->port().port));
}

}  // namespace gdr
