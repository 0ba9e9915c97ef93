// What gdr_bench's reports share: the median of samples, JSON string escaping, and the CPU
// model line printed above every table.
#pragma once

#include <string>
#include <vector>

namespace gdrbench {

// Median of `v` (the mean of the middle two for an even count); 0 for no samples.
double Median(std::vector<double> v);

// `s` as the inside of a JSON string: quotes, backslashes and control characters escaped.
std::string JsonEscape(const std::string& s);

// /proc/cpuinfo's first "model name", or "unknown".
std::string MachineCpu();

}  // namespace gdrbench
