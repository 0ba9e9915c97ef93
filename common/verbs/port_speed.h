// A port's link rate from ibv_port_attr's active_speed (per-lane signalling rate, a bit per IB
// generation) and active_width (lanes), the way ibv_devinfo and sysfs `rate` read them. Rails are
// weighed by it; a value the table does not know reads 0 (unknown) rather than a guess.
#pragma once

#include <cstdint>

namespace gdr::verbs {

// Lanes of an active_width value (1x, 2x, 4x, 8x, 12x); 0 for an unknown value.
int PortWidthLanes(uint8_t active_width);
// Per-lane rate of an active_speed value in Mb/s (SDR 2500 ... NDR 100000); 0 when unknown.
uint64_t PortLaneMbps(uint8_t active_speed);
// Lanes x per-lane rate in Mb/s (EDR 4x: 100000); 0 when either is unknown.
uint64_t PortSpeedMbps(uint8_t active_speed, uint8_t active_width);

}  // namespace gdr::verbs
