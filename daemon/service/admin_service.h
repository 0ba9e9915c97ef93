// The gdrstore.v1.Admin gRPC service (proto/gdrstore/v1/admin.proto): fault rules and volumes
// at run time.
// Calls are checked against the data service's credentials: with a token file, only a line
// with admin=yes may call it.
#pragma once

#include "daemon/sim/fault_injector.h"
#include "daemon/service/store_service.h"
#include "daemon/service/volume_catalog.h"
#include "gdrstore/v1/admin.grpc.pb.h"

namespace gdr {

class AdminService final : public gdrstore::v1::Admin::CallbackService {
 public:
  // All must outlive the service and every RPC it started.
  AdminService(const StoreService* store, FaultInjector* faults, VolumeCatalog* volumes)
      : store_(store), faults_(faults), volumes_(volumes) {}

  grpc::ServerUnaryReactor* SetFault(grpc::CallbackServerContext* ctx,
                                     const gdrstore::v1::SetFaultRequest* request,
                                     gdrstore::v1::SetFaultResponse* response) override;
  grpc::ServerUnaryReactor* ClearFaults(grpc::CallbackServerContext* ctx,
                                        const gdrstore::v1::ClearFaultsRequest* request,
                                        gdrstore::v1::ClearFaultsResponse* response) override;
  grpc::ServerUnaryReactor* ListFaults(grpc::CallbackServerContext* ctx,
                                       const gdrstore::v1::ListFaultsRequest* request,
                                       gdrstore::v1::ListFaultsResponse* response) override;
  grpc::ServerUnaryReactor* CreateVolume(grpc::CallbackServerContext* ctx,
                                         const gdrstore::v1::CreateVolumeRequest* request,
                                         gdrstore::v1::CreateVolumeResponse* response) override;
  grpc::ServerUnaryReactor* DeleteVolume(grpc::CallbackServerContext* ctx,
                                         const gdrstore::v1::DeleteVolumeRequest* request,
                                         gdrstore::v1::DeleteVolumeResponse* response) override;

 private:
  // The caller's label when it may call this service; otherwise the refusal.
  absl::StatusOr<std::string> Authorize(grpc::CallbackServerContext* ctx) const;

  const StoreService* store_;
  FaultInjector* faults_;
  VolumeCatalog* volumes_;
};

}  // namespace gdr
