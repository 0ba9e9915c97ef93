#include "tests/integration/admin_rpc.h"

#include <grpcpp/grpcpp.h>

#include <memory>

#include "client/src/daemon_rpc.h"
#include "common/wire/fault_spec.h"
#include "gdrstore/client.h"
#include "gdrstore/v1/admin.grpc.pb.h"

namespace gdr::integ {

namespace v1 = gdrstore::v1;

namespace {

absl::StatusOr<std::unique_ptr<v1::Admin::Stub>> Stub(const std::string& address,
                                                      const std::string& token) {
  gdrstore::ClientOptions o;
  o.daemon_address = address;
  o.token = token;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> ch = gdrstore::OpenDaemonChannel(o);
  if (!ch.ok()) return ch.status();
  return v1::Admin::NewStub(*ch);
}

}  // namespace

absl::StatusOr<v1::FaultState> SetFault(const std::string& address, const v1::FaultSpec& spec,
                                        const std::string& token) {
  auto stub = Stub(address, token);
  if (!stub.ok()) return stub.status();
  grpc::ClientContext ctx;
  v1::SetFaultRequest req;
  *req.mutable_spec() = spec;
  v1::SetFaultResponse resp;
  if (grpc::Status s = (*stub)->SetFault(&ctx, req, &resp); !s.ok()) {
    return gdrstore::FromGrpcStatus(s);
  }
  return resp.fault();
}

absl::StatusOr<v1::FaultState> SetFault(const std::string& address, const std::string& text,
                                        const std::string& token) {
  absl::StatusOr<v1::FaultSpec> spec = ParseFaultSpec(text);
  if (!spec.ok()) return spec.status();
  return SetFault(address, *spec, token);
}

absl::StatusOr<v1::ListFaultsResponse> ListFaults(const std::string& address,
                                                  const std::string& token) {
  auto stub = Stub(address, token);
  if (!stub.ok()) return stub.status();
  grpc::ClientContext ctx;
  v1::ListFaultsResponse resp;
  if (grpc::Status s = (*stub)->ListFaults(&ctx, v1::ListFaultsRequest(), &resp); !s.ok()) {
    return gdrstore::FromGrpcStatus(s);
  }
  return resp;
}

absl::StatusOr<uint64_t> ClearFaults(const std::string& address,
                                     const v1::ClearFaultsRequest& request,
                                     const std::string& token) {
  auto stub = Stub(address, token);
  if (!stub.ok()) return stub.status();
  grpc::ClientContext ctx;
  v1::ClearFaultsResponse resp;
  if (grpc::Status s = (*stub)->ClearFaults(&ctx, request, &resp); !s.ok()) {
    return gdrstore::FromGrpcStatus(s);
  }
  return resp.cleared();
}

absl::StatusOr<v1::CreateVolumeResponse> CreateVolume(const std::string& address,
                                                      const v1::CreateVolumeRequest& request,
                                                      const std::string& token) {
  auto stub = Stub(address, token);
  if (!stub.ok()) return stub.status();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::CreateVolumeResponse resp;
  if (grpc::Status s = (*stub)->CreateVolume(&ctx, request, &resp); !s.ok()) {
    return gdrstore::FromGrpcStatus(s);
  }
  return resp;
}

absl::Status DeleteVolume(const std::string& address, const std::string& name, bool delete_file,
                          const std::string& token) {
  auto stub = Stub(address, token);
  if (!stub.ok()) return stub.status();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::DeleteVolumeRequest req;
  req.set_name(name);
  req.set_delete_file(delete_file);
  v1::DeleteVolumeResponse resp;
  return gdrstore::FromGrpcStatus((*stub)->DeleteVolume(&ctx, req, &resp));
}

}  // namespace gdr::integ
