// Client::CreateVolume / DeleteVolume: the daemon's Admin service on the client's channel; and
// the rest of Client's Store face (store.h): ListVolumes, ConnectedTo.
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/wire/volume_name.h"
#include "client/src/daemon_rpc.h"
#include "gdrstore/client.h"
#include "gdrstore/v1/admin.grpc.pb.h"

namespace gdrstore {
namespace {

// Checked before it is sent: a name that is not UTF-8 fails the request's parsing in the
// daemon, which answers an unnamed UNIMPLEMENTED.
absl::Status CheckName(const std::string& name) {
  if (gdr::IsVolumeNameSyntax(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("name '", gdr::ShownVolumeName(name),
                                                 "' must be ", gdr::kVolumeNameRule));
}

}  // namespace

absl::StatusOr<bool> Client::CreateVolume(const std::string& name, uint64_t size, bool file,
                                          const std::string& media,
                                          std::chrono::milliseconds timeout) {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  grpc::ClientContext ctx;
  // Making a large volume fills it: the answer may take a while.
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::CreateVolumeRequest req;
  req.set_name(name);
  req.set_size(size);
  req.set_file(file);
  req.set_media(media);
  v1::CreateVolumeResponse resp;
  grpc::Status s = v1::Admin::NewStub(rpc_->channel)->CreateVolume(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp.created();
}

absl::Status Client::DeleteVolume(const std::string& name, bool delete_file) {
  if (absl::Status s = CheckName(name); !s.ok()) return s;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::DeleteVolumeRequest req;
  req.set_name(name);
  req.set_delete_file(delete_file);
  v1::DeleteVolumeResponse resp;
  return FromGrpcStatus(v1::Admin::NewStub(rpc_->channel)->DeleteVolume(&ctx, req, &resp));
}

absl::StatusOr<std::vector<StoreVolume>> Client::ListVolumes() {
  absl::StatusOr<v1::GetInfoResponse> info = GetInfo();
  if (!info.ok()) return info.status();
  std::vector<StoreVolume> out;
  for (const v1::VolumeInfo& v : info->volumes()) {
    out.push_back(StoreVolume{v.name(), v.size(), v.backing()});
  }
  return out;
}

absl::Status Client::CreateVolume(const StoreVolumeSpec& spec) {
  // A daemon's volume is one piece on one host: a cluster's layout fields would be dropped.
  std::vector<std::string> cluster_fields;
  if (spec.stripe_unit != 0) cluster_fields.push_back("stripe_unit");
  if (spec.replicas != 1) cluster_fields.push_back("replicas");
  if (!spec.members.empty()) cluster_fields.push_back("members");
  if (!cluster_fields.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume '", spec.name, "': ", absl::StrJoin(cluster_fields, ", "),
        " apply to a cluster volume, not to daemon ", options_.daemon_address));
  }
  return CreateVolume(spec.name, spec.size, spec.file, spec.media).status();
}

std::string Client::ConnectedTo() const { return "daemon " + options_.daemon_address; }

}  // namespace gdrstore
