// The one word for which way an op's bytes move, used by every layer of the daemon (transports,
// media models, faults, statistics, trace). The wire keeps its own words: RPC Write is a
// kStoreToClient op, RPC Read a kClientToStore one (and the trace file's get/put the same).
#pragma once

namespace gdr {

enum class Direction {
  kStoreToClient,  // RPC Write (a get): the store's bytes go into the client's buffer; the
                   // simulated device reads
  kClientToStore,  // RPC Read (a put): the client's buffer goes into the store; the simulated
                   // device writes
};

}  // namespace gdr
