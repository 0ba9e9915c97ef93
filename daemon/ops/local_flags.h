// gdrstored's local-transport flags (--local-socket, --local-allow-uid/-gid, --local-*):
// registered on the command line and checked into the local transport's settings. The
// transport is off unless --local-socket names its socket.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/transport/local/local_options.h"

namespace CLI {
class App;
}

namespace gdr {

// Flag values as parsed; FinishLocalFlags checks them into LocalOptions.
struct LocalFlagValues {
  std::string socket;
  std::string socket_mode;  // octal; empty: LocalSocketMode's choice
  std::vector<std::string> allow_uids;  // numbers or user names; "*": anyone
  std::vector<std::string> allow_gids;  // numbers or group names
  std::string max_bytes_per_client = "0";
  uint32_t max_regions_per_client = 4096;
  uint32_t max_clients = 1024;
  std::string fd_reserve = "auto";
  uint32_t copy_threads = 8;
  std::string split_size = "16MiB";
  std::string lock_piece_size = "128MiB";
  uint32_t lock_threads = 2;
  uint32_t lock_idle_ms = 100;
  bool lock_at_start = true;
  std::string lock_budget = "auto";
};

void AddLocalFlags(CLI::App& app, LocalFlagValues* values);
// INVALID_ARGUMENT naming the flag: a path too long for a Unix socket, a mode that is not
// octal, a user or group this host does not know, a size or count out of range, or a --local-*
// setting without --local-socket.
absl::StatusOr<LocalOptions> FinishLocalFlags(const CLI::App& app, const LocalFlagValues& values);

}  // namespace gdr
