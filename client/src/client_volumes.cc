// Client::CreateVolume / DeleteVolume: the daemon's Admin service on the client's channel.
#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
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

}  // namespace gdrstore
