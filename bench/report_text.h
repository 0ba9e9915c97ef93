// What gdr_bench's reports share: the median of samples and the CPU model line printed above
// every table. (JSON is written with common/base/json.h.)
#pragma once

#include <string>
#include <vector>

namespace gdrbench {

// Median of `v` (the mean of the middle two for an even count); 0 for no samples.
double Median(std::vector<double> v);

// /proc/cpuinfo's first "model name", or "unknown".
std::string MachineCpu();

}  // namespace gdrbench
