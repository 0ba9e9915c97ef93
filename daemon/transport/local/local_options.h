// The local transport's settings as plain values: what the daemon's configuration fills in and
// reload compares, kept apart from the transport's code so neither has to include the other.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
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
  // Page-locking volumes for GPU copies (page_locker.h), off the copies' path: in pieces of
  // lock_piece_bytes on lock_threads threads (the driver may serialise registrations: both are
  // knobs to measure with), a piece starting once GPU copies have paused for lock_idle_ms (0:
  // alongside them). lock_at_start: with a GPU on the host, the volumes served from the start
  // are locked whole in the background from the start, not only the pieces copies touch.
  // lock_budget_bytes: file-backed volumes' bytes locked at once (their page-cache pages can
  // then not be reclaimed); unset: half of MemTotal; 0: file volumes are never locked.
  uint64_t lock_piece_bytes = uint64_t{128} << 20;
  uint32_t lock_threads = 2;
  uint32_t lock_idle_ms = 100;
  bool lock_at_start = true;
  std::optional<uint64_t> lock_budget_bytes;
};

}  // namespace gdr
