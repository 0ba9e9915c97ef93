// `gdrctl selftest`: one command a hardware owner runs to check a transport end to end against
// a running gdrstored: the daemon's offer, this host's side (for dc: the DCT), buffer
// registration, verified Writes and Reads of several sizes, a remote access error on purpose
// and the recovery after it. Prints PASS/FAIL per step with the error (verbs status included).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "gdrstore/client.h"

namespace gdrctl {

struct SelftestOptions {
  gdrstore::ClientOptions client;  // its transport is the one tested
  std::string volume = "vol0";
  uint64_t offset = 0;  // the steps use [offset, offset + largest size) of the volume
  std::vector<uint64_t> sizes;  // empty: 1 B, 4095 B, 64 KiB, 1 MiB + 7 B, 16 MiB
};

// Runs every step, printing one line each to `out`; returns the number of failed steps (0 when
// all passed). The Read steps overwrite the extent with a test pattern; the last step writes the
// volume's initial pattern back.
int RunSelftest(const SelftestOptions& options, std::ostream& out);

}  // namespace gdrctl
