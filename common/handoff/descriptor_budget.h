// The descriptors a handoff server's process may still open (its soft RLIMIT_NOFILE less those
// open now) and the reserve it keeps: a connection or channel that would eat into the reserve
// is refused, so no client, however many sessions it opens, brings gdragent or gdrstored to
// EMFILE, where every other client's next connection, channel and descriptor would fail.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gdr::handoff {

class DescriptorBudget {
 public:
  // `reserve` 0: AutoReserve of the limit at each check. `flag` names the reserve in refusals
  // ("--fd-reserve"); `who` is the process ("gdragent").
  DescriptorBudget(uint32_t reserve, std::string flag, std::string who)
      : reserve_(reserve), flag_(std::move(flag)), who_(std::move(who)) {}

  // The soft RLIMIT_NOFILE, read at each call: prlimit(1) may change it under a running process.
  static uint64_t Limit();
  // Descriptors open in this process (entries of /proc/self/fd). At EMFILE (or ENFILE) the
  // directory cannot be opened, which says the same: Limit(). INTERNAL when /proc cannot be
  // read.
  static absl::StatusOr<uint64_t> OpenNow();
  // An eighth of `limit`, at least 16 and at most 1024: room for what the process opens for
  // the clients it serves (gRPC connections, an upstream's, logs, the store's files).
  static uint64_t AutoReserve(uint64_t limit);

  // The reserve under `limit`: the one configured, else AutoReserve.
  uint64_t ReserveUnder(uint64_t limit) const {
    return reserve_ != 0 ? reserve_ : AutoReserve(limit);
  }
  // Descriptors clients may hold in all: the limit less the reserve (0 when none).
  uint64_t Usable() const;
  const std::string& flag() const { return flag_; }

  // OK when `need` more descriptors can be opened leaving the reserve free; otherwise
  // RESOURCE_EXHAUSTED saying that `what` is refused, how many of how many descriptors are open,
  // and the reserve by its flag. OK (logged) when /proc cannot be read. Thread-safe; reads
  // /proc (no lock, no callback).
  absl::Status Check(uint64_t need, absl::string_view what) const;

  // INVALID_ARGUMENT naming the flag when a configured reserve leaves clients nothing under
  // the limit now; OK for the derived one.
  absl::Status Validate() const;

 private:
  const uint32_t reserve_;
  const std::string flag_;
  const std::string who_;
};

}  // namespace gdr::handoff
