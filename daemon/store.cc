#include "daemon/store.h"

#include <sys/mman.h>

#include <cerrno>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "common/units.h"

namespace gdr {

bool IsValidVolumeName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<VolumeSpec> ParseVolumeSpec(absl::string_view text) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume '", text, "' must be NAME=SIZE (e.g. vol0=1GiB)"));
  }
  VolumeSpec spec;
  spec.name = std::string(text.substr(0, eq));
  if (!IsValidVolumeName(spec.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume name '", spec.name, "' must be 1..64 characters of [A-Za-z0-9_.-]"));
  }
  GDR_ASSIGN_OR_RETURN(spec.size, ParseSize(text.substr(eq + 1)));
  if (spec.size == 0) {
    return absl::InvalidArgumentError(absl::StrCat("volume '", spec.name, "' has size 0"));
  }
  return spec;
}

absl::StatusOr<std::unique_ptr<Volume>> Volume::Create(const VolumeSpec& spec) {
  void* p = ::mmap(nullptr, spec.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
                   MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot map ", FormatSize(spec.size),
                                                     " for volume '", spec.name,
                                                     "': ", strerror(errno)));
  }
  auto* data = static_cast<std::byte*>(p);
  // Fill in parallel slices: a multi-GiB volume should not take seconds to come up.
  const uint64_t seed = PatternSeed(spec.name);
  const unsigned workers = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  // Round the per-worker share UP before aligning: flooring it left the tail unfilled when
  // size < workers (slice 0) or when size / workers was already page-aligned.
  const uint64_t share = spec.size / workers + (spec.size % workers != 0 ? 1 : 0);
  const uint64_t slice = (share + 4095) & ~uint64_t{4095};
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < workers; ++i) {
    const uint64_t begin = uint64_t{i} * slice;
    if (begin >= spec.size) break;
    const uint64_t len = std::min(slice, spec.size - begin);
    threads.emplace_back([=] { PatternFill(seed, begin, {data + begin, len}); });
  }
  for (auto& t : threads) t.join();
  return std::unique_ptr<Volume>(new Volume(spec.name, spec.size, data));
}

Volume::~Volume() { ::munmap(data_, size_); }

absl::StatusOr<std::unique_ptr<Store>> Store::Create(const std::vector<VolumeSpec>& specs) {
  std::unique_ptr<Store> store(new Store());
  for (const VolumeSpec& spec : specs) {
    if (store->volumes_.count(spec.name) != 0) {
      return absl::AlreadyExistsError(absl::StrCat("volume '", spec.name, "' given twice"));
    }
    GDR_ASSIGN_OR_RETURN(auto volume, Volume::Create(spec));
    store->volumes_.emplace(spec.name, std::move(volume));
  }
  return store;
}

const Volume* Store::Find(absl::string_view name) const {
  auto it = volumes_.find(name);
  return it == volumes_.end() ? nullptr : it->second.get();
}

}  // namespace gdr
