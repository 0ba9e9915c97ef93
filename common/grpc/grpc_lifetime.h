// Debian's gRPC 1.51 serves callback calls on a shared "alternative" completion queue that it
// creates when the first channel makes a callback call and tears down (joining its threads)
// when the last such channel goes. A channel closing while the next one opens races that
// teardown: an ASan double free in grpc_cq_internal_unref in one of the queue's threads, seen
// between tests that close a Client and open the next under load (about 1 run in 20). A process
// that opens channels calls this first: one channel that lives until exit holds the queue.
#pragma once

namespace gdr {

// Idempotent and thread-safe; the first call makes the channel and one callback call on it.
void KeepGrpcCallbackQueue();

}  // namespace gdr
