#include "daemon/store/media_settings.h"

#include <array>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "common/base/units.h"

namespace gdr {
namespace {

constexpr uint64_t kMaxLatencyUs = 60'000'000;  // a minute: longer is a hang, not a device
constexpr uint64_t kMaxIops = 100'000'000;
// 1 PiB/s: past any device, and far below 2^63, where the timing's signed arithmetic would wrap
// and give transfers negative durations.
constexpr uint64_t kMaxRate = uint64_t{1} << 50;
constexpr uint32_t kMaxQueueDepth = 65536;  // NVMe's largest queue

struct Preset {
  const char* name;
  MediaSettings settings;
};

MediaSettings Figures(uint64_t latency_us, uint64_t p99_us, uint64_t bandwidth,
                      uint64_t read_bandwidth, uint64_t write_bandwidth, uint64_t read_iops,
                      uint64_t write_iops, uint32_t queue_depth) {
  MediaSettings s;
  s.latency_us = latency_us;
  s.p99_us = p99_us;
  s.bandwidth = bandwidth;
  s.read_bandwidth = read_bandwidth;
  s.write_bandwidth = write_bandwidth;
  s.read_iops = read_iops;
  s.write_iops = write_iops;
  s.queue_depth = queue_depth;
  return s;
}

// Bandwidths and IOPS are the data sheets' (MB = 10^6 bytes); latencies and
// queue depths are the model's choices where a data sheet gives none.
// docs/simulation.md names each source.
const std::array<Preset, 5>& Presets() {
  static const std::array<Preset, 5> presets = {{
      // Samsung 990 PRO (PCIe 4.0 x4): 7,450 / 6,900 MB/s, 1,400K / 1,550K IOPS
      // (4 KiB, QD32).
      {"nvme-gen4", Figures(60, 250, 0, 7'450'000'000, 6'900'000'000, 1'400'000, 1'550'000, 128)},
      // Samsung PM1743 (PCIe 5.0 x4): 13,000 / 6,600 MB/s, 2,500K / 250K IOPS.
      {"nvme-gen5", Figures(50, 200, 0, 13'000'000'000, 6'600'000'000, 2'500'000, 250'000, 256)},
      // Samsung 870 EVO (SATA 6 Gb/s): 560 / 530 MB/s, 98K / 88K IOPS (QD32);
      // 13K read IOPS at
      // QD1 = 77 us per read. NCQ holds 32 commands.
      {"sata-ssd", Figures(77, 500, 0, 560'000'000, 530'000'000, 98'000, 88'000, 32)},
      // Seagate Exos X18 (7,200 rpm): 270 MB/s sustained, 4.16 ms average
      // rotational latency
      // plus a seek; one actuator, so one op at a time and reads and writes
      // share the head.
      {"hdd", Figures(8'300, 25'000, 270'000'000, 0, 0, 0, 0, 1)},
      // Amazon S3 (per partitioned prefix): 5,500 GET/s, 3,500 PUT/s; small
      // requests' median
      // latency in the tens of milliseconds.
      {"object-store", Figures(30'000, 200'000, 0, 0, 0, 5'500, 3'500, 0)},
  }};
  return presets;
}

absl::Status Bad(absl::string_view key, absl::string_view value, absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat("media option ", key, " '", value, "' must be ", want));
}

absl::Status ParseCount(absl::string_view key, absl::string_view value, uint64_t max,
                        uint64_t* out) {
  uint64_t v = 0;
  if (!absl::SimpleAtoi(value, &v) || v > max) {
    return Bad(key, value, absl::StrCat("an integer 0..", max, " (0 = off)"));
  }
  *out = v;
  return absl::OkStatus();
}

absl::Status ParseRate(absl::string_view key, absl::string_view value, uint64_t* out) {
  absl::string_view v = value;
  absl::ConsumeSuffix(&v, "/s");
  absl::StatusOr<uint64_t> bytes = ParseSize(v);
  if (!bytes.ok()) {
    return Bad(
        key, value,
        absl::StrCat("SIZE/s, e.g. 200MiB/s, 0 = unlimited (", bytes.status().message(), ")"));
  }
  if (*bytes > kMaxRate) return Bad(key, value, "at most 1PiB/s, i.e. 1024TiB/s (0 = unlimited)");
  *out = *bytes;
  return absl::OkStatus();
}

void AppendIf(std::string* out, absl::string_view key, uint64_t value, uint64_t preset_value,
              bool rate) {
  if (value == 0 && preset_value == 0) return;
  std::string text = absl::StrCat(value);
  if (rate) {
    // "100MiB/s" where a binary unit divides the rate exactly, else plain bytes
    // ("7450000000/s").
    const std::string sized = absl::StrReplaceAll(FormatSize(value), {{" ", ""}});
    text = absl::StrCat(absl::EndsWith(sized, "B") && !absl::EndsWith(sized, "iB") ? text : sized,
                        "/s");
  }
  absl::StrAppend(out, out->empty() ? "" : ",", key, "=", text);
}

}  // namespace

bool IsMediaOption(absl::string_view key) {
  for (absl::string_view k :
       {"media", "latency_us", "p99_us", "bandwidth", "read_bandwidth", "write_bandwidth", "iops",
        "read_iops", "write_iops", "queue_depth", "seed"}) {
    if (key == k) return true;
  }
  return false;
}

std::vector<std::string> MediaPresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : Presets()) names.emplace_back(p.name);
  return names;
}

absl::Status SetMediaOption(absl::string_view key, absl::string_view value, MediaSettings* s) {
  if (key == "media") {
    for (const Preset& p : Presets()) {
      if (value == p.name) {
        const uint64_t seed = s->seed;
        *s = p.settings;
        s->preset = p.name;
        s->seed = seed;
        return absl::OkStatus();
      }
    }
    return Bad(key, value, absl::StrCat("a preset: ", absl::StrJoin(MediaPresetNames(), ", ")));
  }
  if (key == "latency_us") return ParseCount(key, value, kMaxLatencyUs, &s->latency_us);
  if (key == "p99_us") return ParseCount(key, value, kMaxLatencyUs, &s->p99_us);
  if (key == "bandwidth") return ParseRate(key, value, &s->bandwidth);
  if (key == "read_bandwidth") return ParseRate(key, value, &s->read_bandwidth);
  if (key == "write_bandwidth") return ParseRate(key, value, &s->write_bandwidth);
  if (key == "iops") return ParseCount(key, value, kMaxIops, &s->iops);
  if (key == "read_iops") return ParseCount(key, value, kMaxIops, &s->read_iops);
  if (key == "write_iops") return ParseCount(key, value, kMaxIops, &s->write_iops);
  if (key == "queue_depth") {
    uint64_t qd = 0;
    if (absl::Status st = ParseCount(key, value, kMaxQueueDepth, &qd); !st.ok()) return st;
    s->queue_depth = static_cast<uint32_t>(qd);
    return absl::OkStatus();
  }
  if (key == "seed") {
    if (!absl::SimpleAtoi(value, &s->seed)) return Bad(key, value, "an unsigned 64-bit integer");
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown media option '", key, "'"));
}

absl::Status CheckMediaSettings(const MediaSettings& s) {
  if (s.p99_us == 0) return absl::OkStatus();
  if (s.latency_us == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("media option p99_us=", s.p99_us, " needs latency_us (the median) too"));
  }
  if (s.p99_us < s.latency_us) {
    return absl::InvalidArgumentError(absl::StrCat("media option p99_us=", s.p99_us,
                                                   " must be at least latency_us=", s.latency_us,
                                                   " (the median)"));
  }
  return absl::OkStatus();
}

std::string FormatMediaSettings(const MediaSettings& s) {
  // A seed alone changes no timing, but it is a setting the text must carry back.
  if (!s.enabled() && s.preset.empty() && s.seed == MediaSettings{}.seed) return "off";
  MediaSettings base;
  std::string out;
  if (!s.preset.empty()) {
    out = absl::StrCat("media=", s.preset);
    for (const Preset& p : Presets()) {
      if (s.preset == p.name) base = p.settings;
    }
  }
  // Every figure that is set, and every one a preset set that was turned off,
  // so the text parses back to exactly these settings.
  AppendIf(&out, "latency_us", s.latency_us, base.latency_us, false);
  AppendIf(&out, "p99_us", s.p99_us, base.p99_us, false);
  AppendIf(&out, "bandwidth", s.bandwidth, base.bandwidth, true);
  AppendIf(&out, "read_bandwidth", s.read_bandwidth, base.read_bandwidth, true);
  AppendIf(&out, "write_bandwidth", s.write_bandwidth, base.write_bandwidth, true);
  AppendIf(&out, "iops", s.iops, base.iops, false);
  AppendIf(&out, "read_iops", s.read_iops, base.read_iops, false);
  AppendIf(&out, "write_iops", s.write_iops, base.write_iops, false);
  AppendIf(&out, "queue_depth", s.queue_depth, base.queue_depth, false);
  if (s.seed != MediaSettings{}.seed)
    absl::StrAppend(&out, out.empty() ? "" : ",", "seed=", s.seed);
  return out;
}

}  // namespace gdr
