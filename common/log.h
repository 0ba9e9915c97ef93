// One leveled logger for daemon and client. Lines go to stderr; under journald (JOURNAL_STREAM
// set) each line carries the sd-daemon "<N>" priority prefix so `journalctl -p` filters work.
// Thread-safe: a line is formatted in full and written with one write(2).
#pragma once

#include <atomic>
#include <cstdint>
#include <sstream>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace gdr {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);
// Tag printed after the level on every line (the program name).
void SetLogTag(absl::string_view tag);

namespace log_internal {

class LogLine {
 public:
  LogLine(LogLevel level, const char* file, int line);
  ~LogLine();
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// True once per `period_ns` per call site; `last` is the call site's static state.
bool RateLimitAllows(std::atomic<int64_t>& last, int64_t period_ns);

}  // namespace log_internal
}  // namespace gdr

#define GDR_LOG_ENABLED(lvl) (static_cast<int>(::gdr::LogLevel::lvl) >= static_cast<int>(::gdr::GetLogLevel()))

// GDR_LOG(kInfo) << "text";
#define GDR_LOG(lvl) \
  if (!GDR_LOG_ENABLED(lvl)) {} else ::gdr::log_internal::LogLine(::gdr::LogLevel::lvl, __FILE__, __LINE__).stream()

// At most one line per `seconds` from this call site: for error paths that a bad peer can
// trigger at line rate.
#define GDR_LOG_EVERY_N_SEC(lvl, seconds)                                                       \
  static std::atomic<int64_t> GDR_STATUS_CONCAT(gdr_log_last_, __LINE__){0};                     \
  if (!GDR_LOG_ENABLED(lvl) || !::gdr::log_internal::RateLimitAllows(                            \
                                   GDR_STATUS_CONCAT(gdr_log_last_, __LINE__),                   \
                                   static_cast<int64_t>((seconds) * 1e9))) {                     \
  } else                                                                                         \
    ::gdr::log_internal::LogLine(::gdr::LogLevel::lvl, __FILE__, __LINE__).stream()

#ifndef GDR_STATUS_CONCAT
#define GDR_STATUS_CONCAT_INNER(a, b) a##b
#define GDR_STATUS_CONCAT(a, b) GDR_STATUS_CONCAT_INNER(a, b)
#endif
