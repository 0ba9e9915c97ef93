#include "common/handoff/descriptor_budget.h"

#include <dirent.h>
#include <errno.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/base/log.h"

namespace gdr::handoff {

uint64_t DescriptorBudget::Limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return uint64_t{1} << 20;
  return static_cast<uint64_t>(r.rlim_cur);
}

absl::StatusOr<uint64_t> DescriptorBudget::OpenNow() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) {
    if (errno == EMFILE || errno == ENFILE) return Limit();
    return absl::InternalError(absl::StrCat("opendir /proc/self/fd: ", strerror(errno)));
  }
  uint64_t n = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n > 0 ? n - 1 : 0;  // the directory's own descriptor was one of them
}

uint64_t DescriptorBudget::AutoReserve(uint64_t limit) {
  return std::clamp<uint64_t>(limit / 8, 16, 1024);
}

uint64_t DescriptorBudget::Usable() const {
  const uint64_t limit = Limit();
  const uint64_t reserve = ReserveUnder(limit);
  return limit > reserve ? limit - reserve : 0;
}

absl::Status DescriptorBudget::Check(uint64_t need, absl::string_view what) const {
  absl::StatusOr<uint64_t> open = OpenNow();
  if (!open.ok()) {
    // Without /proc nothing can be counted; serving on is better than refusing everyone.
    GDR_LOG_EVERY_N_SEC(kWarning, 60) << "handoff: no descriptor reserve: " << open.status();
    return absl::OkStatus();
  }
  const uint64_t limit = Limit();
  const uint64_t reserve = ReserveUnder(limit);
  if (*open + need + reserve <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s refused: %s has %u of its %u descriptors (RLIMIT_NOFILE) open and keeps the last %u "
      "free (%s%s) for the clients it serves; try again once others close, or raise its "
      "LimitNOFILE",
      what, who_, *open, limit, reserve, flag_,
      reserve_ != 0 ? absl::StrCat("=", reserve_)
                    : std::string(", by default an eighth of the limit, 16..1024")));
}

absl::Status DescriptorBudget::Validate() const {
  const uint64_t limit = Limit();
  if (reserve_ == 0 || reserve_ < limit) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s %u leaves no descriptor for clients: this process may open %u (RLIMIT_NOFILE)", flag_,
      reserve_, limit));
}

}  // namespace gdr::handoff
