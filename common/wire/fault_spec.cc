#include "common/wire/fault_spec.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace gdr {

namespace v1 = gdrstore::v1;

namespace {

constexpr std::pair<v1::FaultKind, const char*> kKinds[] = {
    {v1::FAULT_ERROR, "error"},         {v1::FAULT_STALL, "stall"},
    {v1::FAULT_CORRUPT, "corrupt"},     {v1::FAULT_DROP_LINK, "drop-link"},
    {v1::FAULT_QP_ERROR, "qp-error"},   {v1::FAULT_RAIL_DOWN, "rail-down"},
};
// The transport faults: one fault (break the op's path), spelled per transport.
constexpr std::pair<v1::FaultKind, TransportKind> kBreakPath[] = {
    {v1::FAULT_DROP_LINK, TransportKind::kTcp},
    {v1::FAULT_QP_ERROR, TransportKind::kRc},
};
constexpr std::pair<v1::FaultOps, const char*> kOps[] = {
    {v1::FAULT_OPS_ANY, "any"}, {v1::FAULT_OPS_GET, "get"}, {v1::FAULT_OPS_PUT, "put"}};

// A day: longer windows and stalls are mistakes, not rehearsals.
constexpr uint64_t kMaxMs = 24ull * 3600 * 1000;
constexpr uint64_t kMaxCount = uint64_t{1} << 48;
constexpr size_t kMaxNameLength = 128;

bool SaneName(absl::string_view s) {
  if (s.size() > kMaxNameLength) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-' || c == ':' || c == '@' || c == '/' ||
                    c == '[' || c == ']';
    if (!ok) return false;
  }
  return true;
}

absl::Status Bad(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("fault ", field, ": ", why));
}

absl::StatusOr<uint64_t> ParseMs(absl::string_view key, absl::string_view value) {
  absl::Duration d;
  if (!absl::ParseDuration(value, &d) || d < absl::ZeroDuration()) {
    return Bad(key, "not a duration such as 250ms or 5s");
  }
  if (d > absl::Milliseconds(kMaxMs)) return Bad(key, "longer than 24h");
  if (d % absl::Milliseconds(1) != absl::ZeroDuration()) {
    return Bad(key, "not a whole number of milliseconds");
  }
  return static_cast<uint64_t>(absl::ToInt64Milliseconds(d));
}

absl::StatusOr<uint64_t> ParseCount(absl::string_view key, absl::string_view value) {
  uint64_t n = 0;
  if (!absl::SimpleAtoi(value, &n)) return Bad(key, "not a non-negative integer");
  return n;
}

absl::StatusOr<int32_t> ParseCode(absl::string_view value) {
  int32_t n = 0;
  if (absl::SimpleAtoi(value, &n)) return n;  // range checked by CheckFaultSpec
  for (int c = 1; c <= 16; ++c) {
    if (absl::StatusCodeToString(static_cast<absl::StatusCode>(c)) == value) return c;
  }
  return Bad("code", "not a status code name (UNAVAILABLE, DATA_LOSS, ...) or number 1..16");
}

std::string FormatMs(uint64_t ms) { return absl::FormatDuration(absl::Milliseconds(ms)); }

// The shortest text that parses back to the same double (StrCat keeps 6 digits only).
std::string FormatRate(double r) {
  char buf[32];
  const std::to_chars_result res = std::to_chars(buf, buf + sizeof(buf), r);
  return std::string(buf, res.ptr);
}

}  // namespace

const char* FaultKindName(v1::FaultKind kind) {
  for (const auto& [k, name] : kKinds) {
    if (k == kind) return name;
  }
  return "unspecified";
}

std::optional<TransportKind> BreakPathTransport(v1::FaultKind kind) {
  for (const auto& [k, transport] : kBreakPath) {
    if (k == kind) return transport;
  }
  return std::nullopt;
}

absl::StatusOr<v1::FaultSpec> ParseFaultSpec(absl::string_view text) {
  v1::FaultSpec spec;
  if (text.empty()) return Bad("spec", "empty (kind=... is required)");
  absl::flat_hash_set<std::string> seen;
  for (absl::string_view field : absl::StrSplit(text, ',')) {
    const size_t eq = field.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return Bad("spec", absl::StrCat("field '", field.substr(0, 64), "' is not KEY=VALUE"));
    }
    const absl::string_view key = field.substr(0, eq);
    const absl::string_view value = field.substr(eq + 1);
    if (!seen.insert(std::string(key)).second) return Bad(key, "given twice");
    if (key == "kind") {
      bool found = false;
      for (const auto& [k, name] : kKinds) {
        if (value == name) {
          spec.set_kind(k);
          found = true;
        }
      }
      if (!found) {
        return Bad("kind", "not one of error, stall, corrupt, drop-link, qp-error, rail-down");
      }
    } else if (key == "volume") {
      spec.set_volume(std::string(value));
    } else if (key == "client") {
      spec.set_client(std::string(value));
    } else if (key == "rail") {
      spec.set_rail(std::string(value));
    } else if (key == "ops") {
      bool found = false;
      for (const auto& [o, name] : kOps) {
        if (value == name) {
          spec.set_ops(o);
          found = true;
        }
      }
      if (!found) return Bad("ops", "not one of any, get, put");
    } else if (key == "rate") {
      double r = 0;
      if (!absl::SimpleAtod(value, &r)) return Bad("rate", "not a number");
      if (!(r > 0)) return Bad("rate", "must be in (0, 1]");  // 0 would mean "every op"
      spec.set_rate(r);
    } else if (key == "every" || key == "count" || key == "seed") {
      absl::StatusOr<uint64_t> n = ParseCount(key, value);
      if (!n.ok()) return n.status();
      if (key == "every" && *n == 0) return Bad("every", "must be at least 1");
      if (key == "every") spec.set_every(*n);
      if (key == "count") spec.set_count(*n);
      if (key == "seed") spec.set_seed(*n);
    } else if (key == "for" || key == "delay") {
      absl::StatusOr<uint64_t> ms = ParseMs(key, value);
      if (!ms.ok()) return ms.status();
      (key == "for" ? spec.set_for_ms(*ms) : spec.set_delay_ms(*ms));
    } else if (key == "code") {
      absl::StatusOr<int32_t> code = ParseCode(value);
      if (!code.ok()) return code.status();
      spec.set_code(*code);
    } else {
      return Bad("spec", absl::StrCat("unknown key '", key.substr(0, 32),
                                      "' (keys: kind, volume, client, ops, rate, every, count, "
                                      "for, seed, code, delay, rail)"));
    }
  }
  if (absl::Status s = CheckFaultSpec(spec); !s.ok()) return s;
  return spec;
}

std::string FormatFaultSpec(const v1::FaultSpec& spec) {
  std::string out = absl::StrCat("kind=", FaultKindName(spec.kind()));
  if (!spec.volume().empty()) absl::StrAppend(&out, ",volume=", spec.volume());
  if (!spec.client().empty()) absl::StrAppend(&out, ",client=", spec.client());
  if (spec.ops() != v1::FAULT_OPS_ANY) {
    for (const auto& [o, name] : kOps) {
      if (o == spec.ops()) absl::StrAppend(&out, ",ops=", name);
    }
  }
  if (spec.rate() != 0) absl::StrAppend(&out, ",rate=", FormatRate(spec.rate()));
  if (spec.every() != 0) absl::StrAppend(&out, ",every=", spec.every());
  if (spec.count() != 0) absl::StrAppend(&out, ",count=", spec.count());
  if (spec.for_ms() != 0) absl::StrAppend(&out, ",for=", FormatMs(spec.for_ms()));
  if (spec.code() != 0) {
    absl::StrAppend(&out, ",code=", absl::StatusCodeToString(
                                        static_cast<absl::StatusCode>(spec.code())));
  }
  if (spec.delay_ms() != 0) absl::StrAppend(&out, ",delay=", FormatMs(spec.delay_ms()));
  if (!spec.rail().empty()) absl::StrAppend(&out, ",rail=", spec.rail());
  if (spec.seed() != 0) absl::StrAppend(&out, ",seed=", spec.seed());
  return out;
}

absl::Status CheckFaultSpec(const v1::FaultSpec& spec) {
  const v1::FaultKind kind = spec.kind();
  if (kind == v1::FAULT_KIND_UNSPECIFIED || !v1::FaultKind_IsValid(kind)) {
    return Bad("kind", "missing or unknown");
  }
  if (!v1::FaultOps_IsValid(spec.ops())) return Bad("ops", "unknown value");
  if (!SaneName(spec.volume())) return Bad("volume", "not a volume name");
  if (!SaneName(spec.client())) return Bad("client", "not a label or an address");
  if (!SaneName(spec.rail())) return Bad("rail", "not a device name");
  if (std::isnan(spec.rate()) || spec.rate() < 0 || spec.rate() > 1) {
    return Bad("rate", "must be in (0, 1]");
  }
  if (spec.rate() != 0 && spec.every() != 0) return Bad("rate", "give rate or every, not both");
  if (spec.every() > kMaxCount) return Bad("every", "too large");
  if (spec.count() > kMaxCount) return Bad("count", "too large");
  if (spec.for_ms() > kMaxMs) return Bad("for", "longer than 24h");
  if (spec.delay_ms() > kMaxMs) return Bad("delay", "longer than 24h");
  if (kind == v1::FAULT_ERROR) {
    if (spec.code() < 0 || spec.code() > 16) return Bad("code", "must be 1..16");
  } else if (spec.code() != 0) {
    return Bad("code", "only an error fault takes a code");
  }
  if (kind != v1::FAULT_STALL && spec.delay_ms() != 0) {
    return Bad("delay", "only a stall takes a delay");
  }
  if (kind == v1::FAULT_STALL && spec.delay_ms() == 0 && spec.for_ms() == 0) {
    return Bad("delay",
               "a stall needs delay= (each hit op held) or for= (held to the window's end)");
  }
  if (kind == v1::FAULT_CORRUPT && spec.ops() == v1::FAULT_OPS_PUT) {
    return Bad("ops", "corrupt alters what a get delivers; it cannot match puts");
  }
  if (kind == v1::FAULT_RAIL_DOWN) {
    if (spec.rail().empty()) return Bad("rail", "rail-down needs rail=DEVICE");
    if (spec.for_ms() == 0) return Bad("for", "rail-down needs for=DURATION");
    if (!spec.volume().empty() || !spec.client().empty() || spec.rate() != 0 ||
        spec.every() != 0 || spec.count() != 0 || spec.ops() != v1::FAULT_OPS_ANY) {
      return Bad("rail", "rail-down takes only rail=, for= and seed=");
    }
  } else if (!spec.rail().empty()) {
    return Bad("rail", "only rail-down takes a rail");
  }
  return absl::OkStatus();
}

}  // namespace gdr
