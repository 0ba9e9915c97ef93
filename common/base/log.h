// One leveled logger for daemon and client. Lines go to stderr; when stderr is the journal stream
// (JOURNAL_STREAM names its device:inode) each line carries the sd-daemon "<N>" priority prefix
// instead of a timestamp, so `journalctl -p warning` filters work.
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
  // `suppressed`: lines a rate limit dropped at this call site since the last one printed;
  // when nonzero the line ends with a note saying so.
  LogLine(LogLevel level, const char* file, int line, uint64_t suppressed = 0);
  ~LogLine();
  std::ostream& stream() { return stream_; }

 private:
  uint64_t suppressed_;
  std::ostringstream stream_;
};

// Turns GDR_LOG's stream expression into void, the type of the other arm of its `?:`.
struct Voidify {
  void operator&(std::ostream&) {}
};

// A call site's rate-limit state.
struct RateLimitState {
  std::atomic<int64_t> last{0};
  std::atomic<uint64_t> suppressed{0};
};

// True once per `period_ns` per call site; `last` is the call site's static state.
bool RateLimitAllows(std::atomic<int64_t>& last, int64_t period_ns);
// Same, counting refusals; on true, *suppressed_out gets the count since the last true.
bool RateLimitAllows(RateLimitState& state, int64_t period_ns, uint64_t* suppressed_out);

// True when JOURNAL_STREAM names the device:inode of `fd` (sd-daemon(3): only then is the
// stream really connected to journald). Exposed for tests.
bool IsJournalStream(int fd, const char* journal_stream_env);

}  // namespace log_internal
}  // namespace gdr

#define GDR_LOG_ENABLED(lvl) (static_cast<int>(::gdr::LogLevel::lvl) >= static_cast<int>(::gdr::GetLogLevel()))

// GDR_LOG(kInfo) << "text";
// An expression, not an if/else: `if (x) GDR_LOG(...) << ...; else` binds as written and
// compilers have no dangling else to warn about. `&` binds looser than `<<`, so the whole
// stream expression is built first and then discarded.
#define GDR_LOG(lvl)                                                     \
  !GDR_LOG_ENABLED(lvl)                                                  \
      ? (void)0                                                          \
      : ::gdr::log_internal::Voidify() &                                 \
            ::gdr::log_internal::LogLine(::gdr::LogLevel::lvl, __FILE__, __LINE__).stream()

// At most one line per `seconds` from this call site: for error paths that a bad peer can
// trigger at line rate. The next line printed says how many were dropped in between.
#define GDR_LOG_EVERY_N_SEC(lvl, seconds)                                                       \
  static ::gdr::log_internal::RateLimitState GDR_STATUS_CONCAT(gdr_log_rl_, __LINE__);           \
  uint64_t GDR_STATUS_CONCAT(gdr_log_dropped_, __LINE__) = 0;                                    \
  if (!GDR_LOG_ENABLED(lvl) ||                                                                   \
      !::gdr::log_internal::RateLimitAllows(GDR_STATUS_CONCAT(gdr_log_rl_, __LINE__),            \
                                            static_cast<int64_t>((seconds) * 1e9),               \
                                            &GDR_STATUS_CONCAT(gdr_log_dropped_, __LINE__))) {   \
  } else                                                                                         \
    ::gdr::log_internal::LogLine(::gdr::LogLevel::lvl, __FILE__, __LINE__,                       \
                                 GDR_STATUS_CONCAT(gdr_log_dropped_, __LINE__))                  \
        .stream()

#ifndef GDR_STATUS_CONCAT
#define GDR_STATUS_CONCAT_INNER(a, b) a##b
#define GDR_STATUS_CONCAT(a, b) GDR_STATUS_CONCAT_INNER(a, b)
#endif
