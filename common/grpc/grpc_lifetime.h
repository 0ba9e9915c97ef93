// gRPC shuts itself down when its last object goes and starts again with the next one. Debian's
// gRPC 1.51 can then free its callback completion queue twice when the two overlap (an ASan
// double free in grpc_cq_internal_unref, seen between tests that open and close Clients under
// load). A process that opens channels calls this first: gRPC then stays up until exit.
#pragma once

namespace gdr {

// Idempotent and thread-safe; the first call takes one reference on gRPC that is never dropped.
void KeepGrpcInitialized();

}  // namespace gdr
