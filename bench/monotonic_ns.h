// CLOCK_MONOTONIC in nanoseconds. The clock is system-wide, so stamps taken in different
// processes (the scale group's clients) can be compared with each other and with the parent's.
#pragma once

#include <time.h>

#include <cstdint>

namespace gdrbench {

inline int64_t MonotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace gdrbench
