#include "daemon/store/store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/base/socket.h"
#include "common/base/pattern.h"
#include "common/base/status_macros.h"
#include "common/base/units.h"
#include "daemon/store/mapping_guard.h"

namespace gdr {
namespace {

constexpr const char* kMediaOptions =
    "media, latency_us, p99_us, bandwidth, read_bandwidth, write_bandwidth, iops, read_iops, "
    "write_iops, queue_depth, seed";

}  // namespace

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
    return absl::InvalidArgumentError(absl::StrCat(
        "volume '", text, "' must be NAME=SIZE[,file=/path][,OPTION=VALUE...] (options: ",
        kMediaOptions, "; e.g. vol0=1GiB or vol0=1GiB,media=nvme-gen4)"));
  }
  VolumeSpec spec;
  spec.name = std::string(text.substr(0, eq));
  if (!IsValidVolumeName(spec.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume name '", spec.name, "' must be 1..64 characters of [A-Za-z0-9_.-]"));
  }
  std::vector<absl::string_view> parts = absl::StrSplit(text.substr(eq + 1), ',');
  GDR_ASSIGN_OR_RETURN(spec.size, ParseSize(parts[0]));
  if (spec.size == 0) {
    return absl::InvalidArgumentError(absl::StrCat("volume '", spec.name, "' has size 0"));
  }
  absl::flat_hash_set<std::string> seen;
  std::vector<std::pair<std::string, absl::string_view>> media;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t e = parts[i].find('=');
    const std::string key(parts[i].substr(0, e));
    const absl::string_view value = e == absl::string_view::npos ? "" : parts[i].substr(e + 1);
    if (e == absl::string_view::npos || value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("volume '", spec.name, "': option '", parts[i], "' must be KEY=VALUE"));
    }
    if (!seen.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("volume '", spec.name, "': option '", key, "' given twice"));
    }
    if (key == "file") {
      if (value[0] != '/') {
        return absl::InvalidArgumentError(absl::StrCat(
            "volume '", spec.name, "': file '", value, "' must be an absolute path"));
      }
      spec.file = std::string(value);
    } else if (IsMediaOption(key)) {
      media.emplace_back(key, value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "volume '", spec.name, "': unknown option '", key, "' (file, ",
          kMediaOptions, ")"));
    }
  }
  // The preset first, wherever it was written, so explicit options override its figures.
  std::stable_partition(media.begin(), media.end(),
                        [](const auto& kv) { return kv.first == "media"; });
  for (const auto& [key, value] : media) {
    if (absl::Status s = SetMediaOption(key, value, &spec.media); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("volume '", spec.name, "': ", s.message()));
    }
  }
  if (absl::Status s = CheckMediaSettings(spec.media); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("volume '", spec.name, "': ", s.message()));
  }
  return spec;
}

namespace {

// Pattern-fills [0, size) of `data` in parallel slices: a multi-GiB volume should not take
// seconds to come up.
void ParallelFill(const std::string& name, std::byte* data, uint64_t size) {
  const uint64_t seed = PatternSeed(name);
  const unsigned workers = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  // Round the per-worker share UP before aligning: flooring it left the tail unfilled when
  // size < workers (slice 0) or when size / workers was already page-aligned.
  const uint64_t share = size / workers + (size % workers != 0 ? 1 : 0);
  const uint64_t slice = (share + 4095) & ~uint64_t{4095};
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < workers; ++i) {
    const uint64_t begin = uint64_t{i} * slice;
    if (begin >= size) break;
    const uint64_t len = std::min(slice, size - begin);
    threads.emplace_back([=] { PatternFill(seed, begin, {data + begin, len}); });
  }
  for (auto& t : threads) t.join();
}

struct MappedFile {
  std::byte* data;
  ScopedFd fd;
};

absl::StatusOr<MappedFile> MapFile(const std::string& path, uint64_t size, int flags) {
  ScopedFd fd(::open(path.c_str(), flags | O_RDWR | O_CLOEXEC, 0640));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  if (flags & O_CREAT) {
    if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("ftruncate ", path, " to ", size));
    }
  } else {
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("stat ", path));
    if (static_cast<uint64_t>(st.st_size) != size) {
      return absl::FailedPreconditionError(absl::StrCat(
          "volume file ", path, " holds ", st.st_size, " bytes but the volume is ", size,
          " bytes; refusing to resize existing data (move the file away or fix the size)"));
    }
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return absl::ErrnoToStatus(errno, absl::StrCat("mmap ", path));
  // The fd stays open with the volume: CheckBacked fstats the very file that is mapped.
  return MappedFile{static_cast<std::byte*>(p), std::move(fd)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<Volume>> Volume::Create(const VolumeSpec& spec) {
  if (spec.file.empty()) {
    void* p = ::mmap(nullptr, spec.size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot map ", FormatSize(spec.size),
                                                       " for volume '", spec.name,
                                                       "': ", strerror(errno)));
    }
    auto* data = static_cast<std::byte*>(p);
    ParallelFill(spec.name, data, spec.size);
    return std::unique_ptr<Volume>(new Volume(spec.name, spec.size, data, "", false, ScopedFd()));
  }
  struct stat st {};
  if (::stat(spec.file.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("volume file ", spec.file, " is not a regular file"));
    }
    GDR_ASSIGN_OR_RETURN(MappedFile mapped, MapFile(spec.file, spec.size, 0));
    return std::unique_ptr<Volume>(
        new Volume(spec.name, spec.size, mapped.data, spec.file, false, std::move(mapped.fd)));
  }
  if (errno != ENOENT) return absl::ErrnoToStatus(errno, absl::StrCat("stat ", spec.file));
  const std::string partial = spec.file + ".partial";
  ::unlink(partial.c_str());  // left by a crash during an earlier fill
  GDR_ASSIGN_OR_RETURN(MappedFile mapped, MapFile(partial, spec.size, O_CREAT | O_EXCL));
  std::byte* const data = mapped.data;
  auto unmap = absl::MakeCleanup([&] { ::munmap(data, spec.size); ::unlink(partial.c_str()); });
  ParallelFill(spec.name, data, spec.size);
  if (::msync(data, spec.size, MS_SYNC) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("msync ", partial));
  }
  if (::rename(partial.c_str(), spec.file.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("rename ", partial, " -> ", spec.file));
  }
  std::move(unmap).Cancel();
  return std::unique_ptr<Volume>(
      new Volume(spec.name, spec.size, data, spec.file, true, std::move(mapped.fd)));
}

Volume::Volume(std::string name, uint64_t size, std::byte* data, std::string file, bool created,
               ScopedFd fd)
    : name_(std::move(name)), size_(size), data_(data), file_(std::move(file)),
      created_(created), fd_(std::move(fd)) {
  if (!file_.empty()) {
    // A file can be truncated under the mapping at any time; copies into and out of it are
    // guarded (mapping_guard.h), and a fault names this volume and file.
    InstallMappingGuard();
    RegisterFileMapping(data_, size_, name_, file_);
  }
}

absl::Status Volume::CheckBacked() const {
  if (file_.empty()) return absl::OkStatus();
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("volume '", name_, "': stat ", file_));
  }
  if (static_cast<uint64_t>(st.st_size) < size_) {
    return absl::DataLossError(absl::StrCat(
        "volume '", name_, "': its file ", file_, " is ", st.st_size, " bytes, shorter than the "
        "volume's ", size_, " (truncated behind the daemon's back?); its ops fail until the "
        "file is ", size_, " bytes again"));
  }
  return absl::OkStatus();
}

absl::Status Volume::Sync(uint64_t offset, uint64_t length) const {
  if (file_.empty() || length == 0) return absl::OkStatus();
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = offset / page * page;
  const uint64_t end = std::min(size_, offset + length);
  if (::msync(data_ + begin, end - begin, MS_SYNC) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("msync ", file_, " [", begin, ", ", end, ")"));
  }
  return absl::OkStatus();
}

Volume::~Volume() {
  if (!file_.empty()) UnregisterFileMapping(data_);
  ::munmap(data_, size_);
}

absl::StatusOr<std::unique_ptr<Store>> Store::Create(const std::vector<VolumeSpec>& specs) {
  std::unique_ptr<Store> store(new Store());
  for (const VolumeSpec& spec : specs) {
    if (store->volumes_.count(spec.name) != 0) {
      return absl::AlreadyExistsError(absl::StrCat("volume '", spec.name, "' given twice"));
    }
    GDR_ASSIGN_OR_RETURN(auto volume, Volume::Create(spec));
    store->volumes_.emplace(spec.name, std::move(volume));
  }
  VolumeSpec source;
  source.name = kFaultSourceVolume;
  source.size = 4096;
  GDR_ASSIGN_OR_RETURN(store->fault_source_, Volume::Create(source));
  for (uint64_t i = 0; i < source.size; ++i) {
    store->fault_source_->data()[i] = static_cast<std::byte>(i & 0xff);
  }
  return store;
}

const Volume* Store::Find(absl::string_view name) const {
  auto it = volumes_.find(name);
  return it == volumes_.end() ? nullptr : it->second.get();
}

}  // namespace gdr
