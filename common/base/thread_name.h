// Names the calling thread (as `top -H`, `ps -L`, gdb and /proc/PID/task/TID/comm show it), so
// the daemon's and the client library's threads can be told apart when profiling. Linux keeps
// 15 characters; longer names are cut.
#pragma once

namespace gdr {

void SetThreadName(const char* name);

}  // namespace gdr
