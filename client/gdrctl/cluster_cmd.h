// gdrctl's cluster commands: `cluster status`, `cluster create-volume`, and write/read/bench
// on a cluster volume (--cluster URL or --cluster-file FILE) through ClusterClient.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gdrstore/cluster.h"

namespace gdrctl {

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

// Each returns gdrctl's exit code (0 ok, 1 failed, 3 verification mismatch) and prints to
// `out`, JSON when `json`.
int ClusterStatus(gdrstore::ClusterClient& c, bool json, std::ostream& out);
int ClusterCreateVolume(gdrstore::ClusterClient& c, const std::string& name,
                        uint64_t stripe_unit, uint32_t replicas,
                        const std::vector<std::string>& members, bool json, std::ostream& out);
// get: store -> buffer (gdrctl write); put: buffer -> store (gdrctl read). The pattern is that
// of (volume, salt) at logical offsets: --verify on a get checks what a put with that salt wrote.
int ClusterOp(gdrstore::ClusterClient& c, bool put, const ClusterOpArgs& a, bool json,
              std::ostream& out);
int ClusterBench(gdrstore::ClusterClient& c, const ClusterBenchArgs& a, bool json,
                 std::ostream& out);

}  // namespace gdrctl
