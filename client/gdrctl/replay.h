// `gdrctl replay FILE`: issues the ops of a gdrstored trace (common/wire/trace_format.h) against a
// daemon, one Client (own connection and buffer) per recorded client, at the recorded pace or
// back to back, and prints the recorded and replayed figures side by side.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "gdrstore/client.h"

namespace gdrctl {

struct ReplayOptions {
  std::string file;
  // Recorded: each op starts at its recorded offset from the first op's start (per client, in
  // start order). Fast: back to back, each client keeping at most as many ops in flight as it
  // had at once in the recording.
  bool fast = false;
  // 0: as recorded; N (at most the recorded clients with ops): recorded client i is replayed
  // by client i % N.
  uint32_t clients = 0;
  absl::flat_hash_map<std::string, std::string> volume_map;  // recorded name -> replayed name
  // Gets are checked against the volume's initial fill (gdrctl write --verify's pattern, salt
  // 0), and puts store that fill, so the volume stays as it started.
  bool verify = false;
  bool json = false;
};

// Parses --volume-map entries "a=b" into `map`; INVALID_ARGUMENT naming the bad entry.
absl::Status ParseVolumeMap(const std::vector<std::string>& entries,
                            absl::flat_hash_map<std::string, std::string>* map);

using ClientFactory = std::function<absl::StatusOr<std::unique_ptr<gdrstore::Client>>()>;

// Runs the replay and prints the comparison to `out`, errors to `err`. Exit code: 0 when every
// replayed op succeeded, 1 when one failed (counted by code) or the trace cannot be read (the
// error names the file, byte offset, record and field), 2 when an option cannot apply to the
// trace (more --clients than it recorded, a --volume-map of a volume it does not have; checked
// before anything is allocated or connected), 3 on a --verify mismatch.
int RunReplay(const ReplayOptions& options, const ClientFactory& connect, std::ostream& out,
              std::ostream& err);

}  // namespace gdrctl
