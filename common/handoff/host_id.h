// Which running host this is, as both ends of the handoff compare it: a daemon or agent puts it
// in GetInfo's LocalInfo.host_id, and a client picks the local transport only when it matches
// its own (the same kernel boot, so the same memory).
#pragma once

#include <string>

namespace gdr::handoff {

// /proc/sys/kernel/random/boot_id, without its newline; empty when it cannot be read.
std::string HostId();

}  // namespace gdr::handoff
