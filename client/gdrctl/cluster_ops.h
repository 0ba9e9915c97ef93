// write/read/bench on a cluster volume (the target of --cluster URL or --cluster-file FILE)
// through ClusterClient: what those commands run when their target is a cluster.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gdrstore/cluster.h"

namespace gdrctl {

// Each call below returns gdrctl's exit code (0 ok, 1 failed, 3 verification mismatch) and
// prints to `out`, JSON when `json`.
struct ClusterOpArgs {
  std::string volume = "vol0";
  uint64_t offset = 0;
  uint64_t size = 4096;
  uint64_t salt = 1;
  bool verify = false;
};

struct ClusterBenchArgs {
  std::string volume = "vol0";
  uint64_t size = 4 << 20;
  uint64_t iterations = 64;
  uint32_t qd = 4;
  bool put = false;  // read on the wire (buffer -> store); else get
};

// get: store -> buffer (gdrctl write); put: buffer -> store (gdrctl read). The pattern is that
// of (volume, salt) at logical offsets: --verify on a get checks what a put with that salt wrote.
int ClusterOp(gdrstore::ClusterClient& c, bool put, const ClusterOpArgs& a, bool json,
              std::ostream& out);
int ClusterBench(gdrstore::ClusterClient& c, const ClusterBenchArgs& a, bool json,
                 std::ostream& out);

}  // namespace gdrctl
