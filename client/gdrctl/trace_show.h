// `gdrctl trace show FILE`: a gdrstored trace's summary (clients, volumes, ops and bytes per
// kind, failures, span) and its first records, one line each.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace gdrctl {

// Exit code 0, or 1 when the trace cannot be read (the error, naming the file, byte offset and
// record, goes to `err`).
int ShowTrace(const std::string& file, uint64_t records, std::ostream& out, std::ostream& err);

}  // namespace gdrctl
