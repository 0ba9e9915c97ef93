#include "tests/integration/stats_rpc.h"
#include "client/src/daemon_rpc.h"

namespace gdr::integ {

absl::StatusOr<gdrstore::v1::GetStatsResponse> GetStats(gdrstore::Client& client) {
  grpc::ClientContext ctx;
  gdrstore::v1::GetStatsResponse resp;
  grpc::Status s =
      gdr::DaemonStub(client)->GetStats(&ctx, gdrstore::v1::GetStatsRequest(), &resp);
  if (!s.ok()) return gdrstore::FromGrpcStatus(s);
  return resp;
}

}  // namespace gdr::integ
