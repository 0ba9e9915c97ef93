#include "client/src/transport/dc/dc_session.h"

#include "client/src/transport/verbs_registration.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/verbs/verbs_status.h"
#include "common/status_macros.h"

namespace gdr {

namespace v1 = gdrstore::v1;

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
  absl::StatusOr<verbs::DcTargetQp> dct =
      verbs::CreateDct(*s->device_, s->cq_.get(), s->key_, options.dct);
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
}

}  // namespace gdr
