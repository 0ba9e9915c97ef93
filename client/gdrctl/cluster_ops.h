// bench on a cluster volume (the target of --cluster URL or --cluster-file FILE) through
// ClusterClient, with each member's share: what `gdrctl bench` runs when its target is a
// cluster. (write and read take any gdrstore::Store.)
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gdrstore/cluster.h"

namespace gdrctl {

// ClusterBench returns gdrctl's exit code (0 ok, 1 failed, 3 verification mismatch) and
// prints to `out`, JSON when `json`.
struct ClusterBenchArgs {
  std::string volume = "vol0";
  uint64_t size = 4 << 20;
  uint64_t iterations = 64;
  uint32_t qd = 4;
  bool put = false;  // read on the wire (buffer -> store); else get
};

int ClusterBench(gdrstore::ClusterClient& c, const ClusterBenchArgs& a, bool json,
                 std::ostream& out);

}  // namespace gdrctl
