// What a volume's simulated device is: its latency distribution, bandwidth
// (shared, and per direction), IOPS limits and queue depth, parsed from the
// volume spec's options, optionally starting from a named preset whose figures
// come from a public data sheet (docs/simulation.md, "Media models and
// presets").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gdr {

struct MediaSettings {
  std::string preset;            // the preset the figures started from; "" = none (a label)
  uint64_t latency_us = 0;       // per op: fixed, or the median when p99_us is set; 0 = none
  uint64_t p99_us = 0;           // 0 = fixed latency; else the 99th percentile (log-normal)
  uint64_t bandwidth = 0;        // bytes/s shared by reads and writes; 0 = unlimited
  uint64_t read_bandwidth = 0;   // bytes/s of device reads (gets); 0 = unlimited
  uint64_t write_bandwidth = 0;  // bytes/s of device writes (puts); 0 = unlimited
  uint64_t iops = 0;             // ops/s, reads and writes together; 0 = unlimited
  uint64_t read_iops = 0;        // ops/s of device reads; 0 = unlimited
  uint64_t write_iops = 0;       // ops/s of device writes; 0 = unlimited
  uint32_t queue_depth = 0;      // ops inside the device at once; 0 = unlimited
  uint64_t seed = 1;             // of the latency samples (fixed default: runs repeat)

  bool enabled() const {
    return latency_us != 0 || bandwidth != 0 || read_bandwidth != 0 || write_bandwidth != 0 ||
           iops != 0 || read_iops != 0 || write_iops != 0 || queue_depth != 0;
  }
  bool operator==(const MediaSettings&) const = default;
};

// The options a volume spec may carry besides `file` (media, latency_us,
// p99_us, bandwidth, read_bandwidth, write_bandwidth, iops, read_iops,
// write_iops, queue_depth, seed).
bool IsMediaOption(absl::string_view key);

// Sets `key` (one of IsMediaOption's) from `value` on `settings`. `media=NAME`
// replaces every figure with the preset's (callers apply it before the other
// options, so explicit options override a preset's). INVALID_ARGUMENT naming
// the option and its allowed range on a bad value or an unknown preset (the
// message lists the presets).
absl::Status SetMediaOption(absl::string_view key, absl::string_view value,
                            MediaSettings* settings);

// Checks what one option alone cannot: a p99 needs a median no larger than it.
// INVALID_ARGUMENT naming the options.
absl::Status CheckMediaSettings(const MediaSettings& settings);

// The preset names, in the order docs/simulation.md lists them.
std::vector<std::string> MediaPresetNames();

// The settings as volume-spec options ("media=hdd,latency_us=8300,..."; "off"
// when disabled): for logs, and parsed back by SetMediaOption into the same
// settings.
std::string FormatMediaSettings(const MediaSettings& settings);

}  // namespace gdr
