// The local transport's settings as plain values: what the daemon's configuration fills in and
// reload compares, kept apart from the transport's code so neither has to include the other.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gdr {

struct LocalOptions {
  // The handoff socket (common/handoff); empty: the local transport is off.
  std::string socket_path;
  // The socket file's mode. -1: 0600 when only the daemon's uid and root are admitted, 0666
  // when allow_uids / allow_gids admit others (the credential check decides who gets a session).
  int socket_mode = -1;
  // Who may open a session besides the daemon's own uid and root: these uids, and processes
  // whose primary gid (SO_PEERCRED) is one of these gids. allow_any: everyone who reaches the
  // socket.
  std::vector<uid_t> allow_uids;
  std::vector<gid_t> allow_gids;
  bool allow_any = false;
  // Per client (session): bytes and regions registered; 0 bytes: no limit.
  uint64_t max_bytes_per_client = 0;
  uint32_t max_regions_per_client = 4096;
  uint32_t max_clients = 1024;
  // Descriptors no local client may take (0: an eighth of RLIMIT_NOFILE, 16..1024).
  uint32_t fd_reserve = 0;
  // Threads that copy between store pages and client memory (never a gRPC thread), and the
  // smallest piece a large op is split into so that several threads share its bytes. 8 and
  // 16 MiB: restores into two GPUs at once ran at 71-82 GB/s with them, 61-64 with 4 and 4 MiB
  // (one GPU: 47-50 either way; docs/benchmarks.md "Several GPUs on one host").
  uint32_t copy_threads = 8;
  uint64_t split_bytes = uint64_t{16} << 20;
};

}  // namespace gdr
