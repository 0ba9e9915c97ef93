#include "common/verbs/port_speed.h"

namespace gdr::verbs {

// The values are the IB PortInfo encodings the kernel passes through (enum ib_port_width and
// enum ib_port_speed); libibverbs' headers carry no names for them.
int PortWidthLanes(uint8_t active_width) {
  switch (active_width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
    default: return 0;
  }
}

uint64_t PortLaneMbps(uint8_t active_speed) {
  switch (active_speed) {
    case 1: return 2500;     // SDR
    case 2: return 5000;     // DDR
    case 4: return 10000;    // QDR
    case 8: return 10000;    // FDR10 (sysfs `rate` counts it as QDR)
    case 16: return 14000;   // FDR
    case 32: return 25000;   // EDR
    case 64: return 50000;   // HDR
    case 128: return 100000; // NDR
    default: return 0;
  }
}

uint64_t PortSpeedMbps(uint8_t active_speed, uint8_t active_width) {
  return PortLaneMbps(active_speed) * static_cast<uint64_t>(PortWidthLanes(active_width));
}

}  // namespace gdr::verbs
