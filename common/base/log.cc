#include "common/base/log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace gdr {
namespace log_internal {

bool IsJournalStream(int fd, const char* env) {
  if (env == nullptr || *env == '\0') return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(env, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

}  // namespace log_internal

namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_tag_mu;
std::string g_tag = "gdr";

bool UnderJournald() {
  static const bool journald =
      log_internal::IsJournalStream(STDERR_FILENO, std::getenv("JOURNAL_STREAM"));
  return journald;
}

// sd-daemon.h priorities: 3 err, 4 warning, 6 info, 7 debug.
int SyslogPriority(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return 7;
    case LogLevel::kInfo: return 6;
    case LogLevel::kWarning: return 4;
    case LogLevel::kError: return 3;
  }
  return 6;
}

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return 'D';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kWarning: return 'W';
    case LogLevel::kError: return 'E';
  }
  return '?';
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

void SetLogTag(absl::string_view tag) {
  std::lock_guard<std::mutex> lock(g_tag_mu);
  g_tag = std::string(tag);
}

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "debug") return LogLevel::kDebug;
  if (n == "info") return LogLevel::kInfo;
  if (n == "warning" || n == "warn") return LogLevel::kWarning;
  if (n == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown log level '", name, "' (debug, info, warning, error)"));
}

namespace log_internal {

LogLine::LogLine(LogLevel level, const char* file, int line, uint64_t suppressed)
    : suppressed_(suppressed) {
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  if (UnderJournald()) {
    stream_ << '<' << SyslogPriority(level) << '>';
  } else {
    stream_ << absl::FormatTime("%Y-%m-%dT%H:%M:%E3S ", absl::Now(), absl::LocalTimeZone());
  }
  std::string tag;
  {
    std::lock_guard<std::mutex> lock(g_tag_mu);
    tag = g_tag;
  }
  stream_ << LevelLetter(level) << ' ' << tag << ' ' << base << ':' << line << "] ";
}

LogLine::~LogLine() {
  if (suppressed_ != 0) stream_ << " [" << suppressed_ << " similar lines suppressed]";
  stream_ << '\n';
  const std::string text = stream_.str();
  ssize_t unused = ::write(STDERR_FILENO, text.data(), text.size());
  (void)unused;
}

bool RateLimitAllows(std::atomic<int64_t>& last, int64_t period_ns) {
  const int64_t now = absl::GetCurrentTimeNanos();
  int64_t prev = last.load(std::memory_order_relaxed);
  if (prev != 0 && now - prev < period_ns) return false;
  return last.compare_exchange_strong(prev, now);
}

bool RateLimitAllows(RateLimitState& state, int64_t period_ns, uint64_t* suppressed_out) {
  if (!RateLimitAllows(state.last, period_ns)) {
    state.suppressed.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  *suppressed_out = state.suppressed.exchange(0, std::memory_order_relaxed);
  return true;
}

}  // namespace log_internal
}  // namespace gdr
