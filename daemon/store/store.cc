#include "daemon/store/store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

// What ParseVolumeSpec cannot check option by option: a repeat's fit with the size and file.
absl::Status CheckRepeat(const VolumeSpec& spec) {
  if (spec.repeat == 0) return absl::OkStatus();
  const std::string what = absl::StrCat("volume '", spec.name, "': repeat=", spec.repeat);
  if (!spec.file.empty() || spec.dir != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is for memory volumes; a file volume (file=) keeps every byte it serves"));
  }
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (spec.repeat % page != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be a multiple of the page size, ", page, " bytes"));
  }
  if (spec.size % spec.repeat != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must divide the volume's size, ", spec.size, " bytes"));
  }
  if (spec.size / spec.repeat > kMaxRepeatPeriods) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " recurs ", spec.size / spec.repeat, " times in the volume's ", spec.size,
        " bytes; at most ", kMaxRepeatPeriods, " (one memory mapping each)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MediaSettings> ParseMediaOptions(absl::string_view volume,
                                                absl::string_view options) {
  if (options.empty()) return MediaSettings{};
  // A file and a repeat shape the volume rather than its device.
  for (absl::string_view part : absl::StrSplit(options, ',')) {
    const absl::string_view key = part.substr(0, part.find('='));
    if (key == "file" || key == "repeat") {
      return absl::InvalidArgumentError(
          absl::StrCat("volume '", volume, "': ", key, " is not a media option"));
    }
  }
  // The spec's own parser and checks, on a stand-in size.
  GDR_ASSIGN_OR_RETURN(VolumeSpec spec,
                       ParseVolumeSpec(absl::StrCat(volume, "=4096,", options)));
  return spec.media;
}

absl::StatusOr<VolumeSpec> ParseVolumeOptions(absl::string_view name, uint64_t size,
                                              absl::string_view options) {
  GDR_ASSIGN_OR_RETURN(VolumeSpec spec, ParseVolumeSpec(absl::StrCat(
                                            name, "=", size, options.empty() ? "" : ",", options)));
  if (!spec.file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume '", name, "': file= is not taken here (memory volume options)"));
  }
  return spec;
}

absl::StatusOr<VolumeSpec> ParseVolumeSpec(absl::string_view text) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume '", text, "' must be NAME=SIZE[,file=/path][,OPTION=VALUE...] (options: ",
        kMediaOptions, ", repeat; e.g. vol0=1GiB or vol0=1GiB,media=nvme-gen4)"));
  }
  VolumeSpec spec;
  spec.name = std::string(text.substr(0, eq));
  if (!IsValidVolumeName(spec.name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "volume name '", spec.name.substr(0, kMaxVolumeName), "' must be ", kVolumeNameRule));
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
    } else if (key == "repeat") {
      absl::StatusOr<uint64_t> repeat = ParseSize(value);
      if (!repeat.ok() || *repeat == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "volume '", spec.name, "': repeat '", value, "' must be a SIZE > 0 (",
            repeat.ok() ? "e.g. 1GiB" : repeat.status().message(), ")"));
      }
      spec.repeat = *repeat;
    } else if (IsMediaOption(key)) {
      media.emplace_back(key, value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "volume '", spec.name, "': unknown option '", key, "' (file, repeat, ",
          kMediaOptions, ")"));
    }
  }
  GDR_RETURN_IF_ERROR(CheckRepeat(spec));
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

// Where a file volume's file is: a directory descriptor and the last segment of the path.
// Beneath a --volume-dir every step goes through descriptors that never follow a link; a
// --volume file=PATH is the operator's own path and is followed as given.
struct FileAt {
  ScopedFd parent;
  std::string segment;
  bool beneath = false;
  std::vector<ServedDir::Made> made;  // directories made for it (removed if the create fails)
};

absl::StatusOr<FileAt> LocateFile(const VolumeSpec& spec) {
  FileAt at;
  if (spec.dir != nullptr) {
    at.beneath = true;
    at.segment = std::string(LastSegment(spec.name));
    GDR_ASSIGN_OR_RETURN(at.parent,
                         spec.dir->OpenParent(spec.name, spec.read_only ? nullptr : &at.made));
    return at;
  }
  const size_t slash = spec.file.rfind('/');
  const std::string dir = slash == 0 ? "/" : spec.file.substr(0, slash);
  at.segment = spec.file.substr(slash + 1);
  at.parent = ScopedFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!at.parent.valid()) return absl::ErrnoToStatus(errno, absl::StrCat("open ", dir));
  return at;
}

int OpenAt(const FileAt& at, const std::string& segment, int flags, mode_t mode = 0) {
  // O_NONBLOCK: a FIFO put where a file was expected must not hang the daemon in open().
  flags |= O_NONBLOCK | O_CLOEXEC;
  return at.beneath ? OpenBeneath(at.parent.get(), segment, flags, mode)
                    : ::openat(at.parent.get(), segment.c_str(), flags, mode);
}

absl::Status NotRegular(const std::string& shown) {
  return absl::FailedPreconditionError(
      absl::StrCat("volume file ", shown, " is not a regular file"));
}

// The temporary name a new file is filled under, beside it: short whatever the volume's name
// (a 255-byte segment plus a suffix would pass NAME_MAX), the same for the same name (a crash's
// leftover is found and replaced), hidden, and ending in ".partial" (a scan skips it).
std::string FillName(absl::string_view segment) {
  return absl::StrCat(".", absl::Hex(PatternSeed(segment), absl::kZeroPad16), ".partial");
}

// A repeating volume's range: spec.size bytes of address space reserved, and one memfd of
// spec.repeat bytes mapped shared over each period of it, so transfers and registrations see
// one contiguous range while the host holds one period's memory. The period is allocated up
// front: memory running out then is an error here, not a SIGBUS when a fill or put touches it.
absl::StatusOr<std::byte*> MapRepeating(const VolumeSpec& spec) {
  auto exhausted = [&spec](int err, absl::string_view what) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "volume '", spec.name, "' (repeat=", spec.repeat, "): ", what, ": ", strerror(err)));
  };
  ScopedFd fd(::memfd_create("gdrstored-repeat", MFD_CLOEXEC));
  if (!fd.valid()) return exhausted(errno, "memfd_create");
  if (::fallocate(fd.get(), 0, 0, static_cast<off_t>(spec.repeat)) != 0) {
    const int err = errno;
    return exhausted(err, absl::StrCat("cannot allocate ", FormatSize(spec.repeat)));
  }
  void* p = ::mmap(nullptr, spec.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    return exhausted(err, absl::StrCat("cannot reserve ", FormatSize(spec.size)));
  }
  auto* const base = static_cast<std::byte*>(p);
  for (uint64_t at = 0; at < spec.size; at += spec.repeat) {
    if (::mmap(base + at, spec.repeat, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd.get(),
               0) == MAP_FAILED) {
      const int err = errno;
      ::munmap(base, spec.size);
      return exhausted(err, absl::StrCat("cannot map period ", at / spec.repeat, " of ",
                                         spec.size / spec.repeat, " (vm.max_map_count?)"));
    }
  }
  // The descriptor closes here; the mappings keep the memory.
  return base;
}

absl::StatusOr<std::byte*> MapFd(int fd, const std::string& shown, uint64_t size, bool writable) {
  void* p = ::mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return absl::ErrnoToStatus(errno, absl::StrCat("mmap ", shown));
  return static_cast<std::byte*>(p);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Volume>> Volume::Create(const VolumeSpec& spec) {
  if (spec.read_only && spec.file.empty() && spec.dir == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume '", spec.name, "': only a file volume can be read-only"));
  }
  if (spec.repeat != 0) {
    // Checked again: a spec need not come from ParseVolumeSpec.
    GDR_RETURN_IF_ERROR(CheckRepeat(spec));
    GDR_ASSIGN_OR_RETURN(std::byte* const data, MapRepeating(spec));
    ParallelFill(spec.name, data, spec.repeat);
    return std::unique_ptr<Volume>(new Volume(spec, data, false, ScopedFd()));
  }
  if (spec.file.empty() && spec.dir == nullptr) {
    void* p = ::mmap(nullptr, spec.size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot map ", FormatSize(spec.size),
                                                       " for volume '", spec.name,
                                                       "': ", strerror(errno)));
    }
    auto* data = static_cast<std::byte*>(p);
    ParallelFill(spec.name, data, spec.size);
    return std::unique_ptr<Volume>(new Volume(spec, data, false, ScopedFd()));
  }
  const std::string shown = spec.dir != nullptr ? spec.dir->Shown(spec.name) : spec.file;
  GDR_ASSIGN_OR_RETURN(FileAt at, LocateFile(spec));
  auto undo_dirs = absl::MakeCleanup([&at] { ServedDir::RemoveMade(&at.made); });
  // Not a regular file (a FIFO, a device): refused before it is opened at all.
  struct stat st {};
  const int stat_flags = at.beneath ? AT_SYMLINK_NOFOLLOW : 0;
  if (::fstatat(at.parent.get(), at.segment.c_str(), &st, stat_flags) == 0) {
    if (!S_ISREG(st.st_mode)) {
      return S_ISLNK(st.st_mode)
                 ? absl::FailedPreconditionError(absl::StrCat(
                       shown, " is a symbolic link: a volume is never served through one"))
                 : NotRegular(shown);
    }
    // A read-only volume's file is still opened (and mapped) writable where the daemon may:
    // NICs on kernels before 6.2 and the CUDA driver's page lock pin shared file pages only
    // through a writable mapping. The daemon refuses its puts; nothing else writes it. Where it
    // may not (permissions, a read-only filesystem) the mapping is read-only too.
    bool writable = true;
    ScopedFd fd(OpenAt(at, at.segment, O_RDWR));
    if (!fd.valid() && spec.read_only && (errno == EACCES || errno == EROFS || errno == EPERM)) {
      fd = ScopedFd(OpenAt(at, at.segment, O_RDONLY));
      writable = false;
    }
    if (!fd.valid()) {
      if (errno == ELOOP) {
        return absl::FailedPreconditionError(absl::StrCat(
            shown, " became a symbolic link: a volume is never served through one"));
      }
      return absl::ErrnoToStatus(errno, absl::StrCat("open ", shown));
    }
    // What was opened, checked again: the name may have changed hands since the stat.
    if (::fstat(fd.get(), &st) != 0) return absl::ErrnoToStatus(errno, "stat " + shown);
    if (!S_ISREG(st.st_mode)) return NotRegular(shown);
    if (static_cast<uint64_t>(st.st_size) != spec.size) {
      return absl::FailedPreconditionError(absl::StrCat(
          "volume file ", shown, " holds ", st.st_size, " bytes but the volume is ", spec.size,
          " bytes; refusing to resize existing data (move the file away or fix the size)"));
    }
    GDR_ASSIGN_OR_RETURN(std::byte* data, MapFd(fd.get(), shown, spec.size, writable));
    // The fd stays open with the volume: CheckBacked fstats the very file that is mapped.
    return std::unique_ptr<Volume>(new Volume(spec, data, false, std::move(fd)));
  }
  if (errno != ENOENT) return absl::ErrnoToStatus(errno, absl::StrCat("stat ", shown));
  if (spec.read_only) {
    return absl::NotFoundError(absl::StrCat("volume '", spec.name, "': read-only file ",
                                            shown, " does not exist"));
  }
  const std::string partial = FillName(at.segment);
  ::unlinkat(at.parent.get(), partial.c_str(), 0);  // left by a crash during an earlier fill
  ScopedFd fd(OpenAt(at, partial, O_RDWR | O_CREAT | O_EXCL, 0640));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, absl::StrCat("create ", shown, " (as ",
                                                                    partial, ")"));
  auto drop_partial = absl::MakeCleanup(
      [&at, &partial] { ::unlinkat(at.parent.get(), partial.c_str(), 0); });
  if (::ftruncate(fd.get(), static_cast<off_t>(spec.size)) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("ftruncate ", shown, " to ", spec.size));
  }
  GDR_ASSIGN_OR_RETURN(std::byte* const data, MapFd(fd.get(), shown, spec.size, true));
  auto unmap = absl::MakeCleanup([&] { ::munmap(data, spec.size); });
  ParallelFill(spec.name, data, spec.size);
  if (::msync(data, spec.size, MS_SYNC) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("msync ", shown));
  }
  // Never over a file made meanwhile (by hand, or by another daemon on the directory).
  if (::renameat2(at.parent.get(), partial.c_str(), at.parent.get(), at.segment.c_str(),
                  RENAME_NOREPLACE) != 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(
          absl::StrCat("volume file ", shown, " appeared while it was being made; kept as is"));
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("rename ", partial, " -> ", shown));
  }
  std::move(drop_partial).Cancel();
  std::move(unmap).Cancel();
  std::move(undo_dirs).Cancel();
  return std::unique_ptr<Volume>(new Volume(spec, data, true, std::move(fd)));
}

Volume::Volume(const VolumeSpec& spec, std::byte* data, bool created, ScopedFd fd)
    : name_(spec.name),
      size_(spec.size),
      data_(data),
      file_(spec.dir != nullptr ? spec.dir->Shown(spec.name) : spec.file),
      repeat_(spec.repeat),
      created_(created),
      read_only_(spec.read_only),
      media_(spec.media),
      fd_(std::move(fd)),
      dir_(spec.dir) {
  if (!file_.empty()) {
    // A file can be truncated under the mapping at any time; copies into and out of it are
    // guarded (mapping_guard.h), and a fault names this volume and file.
    InstallMappingGuard();
    RegisterFileMapping(data_, size_, name_, file_);
  }
}

std::string Volume::backing() const {
  if (!file_.empty()) return absl::StrCat("file:", file_);
  return repeat_ != 0 ? absl::StrCat("memory,repeat=", repeat_) : "memory";
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

absl::Status Volume::RemoveFile() const {
  if (dir_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "volume '", name_, "': its file ", file_.empty() ? "(none)" : file_,
        " is not in a --volume-dir; the daemon deletes only files of its writable --volume-dir"));
  }
  absl::StatusOr<ScopedFd> parent = dir_->OpenParent(name_, nullptr);
  if (absl::IsNotFound(parent.status())) return absl::OkStatus();  // gone with its directory
  if (!parent.ok()) return parent.status();
  const std::string segment(LastSegment(name_));
  struct stat mine {}, there {};
  if (::fstat(fd_.get(), &mine) != 0) return absl::ErrnoToStatus(errno, "stat " + file_);
  if (::fstatat(parent->get(), segment.c_str(), &there, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::ErrnoToStatus(errno, "stat " + file_);
  }
  if (there.st_dev != mine.st_dev || there.st_ino != mine.st_ino) {
    return absl::FailedPreconditionError(absl::StrCat(
        "volume '", name_, "': ", file_, " is no longer the volume's file (",
        S_ISLNK(there.st_mode) ? "a symbolic link" : "another file", " took its name); left as is"));
  }
  if (::unlinkat(parent->get(), segment.c_str(), 0) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, "unlink " + file_);
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

void Volume::Attach(const void* owner, std::unique_ptr<Attachment> a) const {
  std::unique_ptr<Attachment> old;
  absl::MutexLock lock(&attach_mu_);
  for (auto& [o, held] : attachments_) {
    if (o == owner) {
      old = std::move(held);  // dropped after the lock
      held = std::move(a);
      return;
    }
  }
  attachments_.emplace_back(owner, std::move(a));
}

Volume::Attachment* Volume::AttachmentOf(const void* owner) const {
  absl::MutexLock lock(&attach_mu_);
  for (const auto& [o, held] : attachments_) {
    if (o == owner) return held.get();
  }
  return nullptr;
}

void Volume::Detach(const void* owner) const {
  std::unique_ptr<Attachment> gone;
  absl::MutexLock lock(&attach_mu_);
  for (auto it = attachments_.begin(); it != attachments_.end(); ++it) {
    if (it->first == owner) {
      gone = std::move(it->second);
      attachments_.erase(it);
      return;
    }
  }
}

Volume::~Volume() {
  // What transports registered on these pages goes before the pages do, newest first.
  {
    absl::MutexLock lock(&attach_mu_);
    while (!attachments_.empty()) attachments_.pop_back();
  }
  if (!file_.empty()) UnregisterFileMapping(data_);
  ::munmap(data_, size_);
  // A file volume let go (deleted at run time, or the daemon ending): its written pages reach
  // the file now, and the file's pages leave the page cache, so whoever serves the file next
  // reads it from the device (what a checkpoint restore after a cache clear rehearses).
  if (fd_.valid()) {
    if (!read_only_) ::fdatasync(fd_.get());
    ::posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_DONTNEED);
  }
}

absl::StatusOr<std::unique_ptr<Store>> Store::Create(const std::vector<VolumeSpec>& specs) {
  std::unique_ptr<Store> store(new Store());
  for (const VolumeSpec& spec : specs) {
    absl::StatusOr<std::shared_ptr<const Volume>> v = store->Add(spec);
    if (absl::IsAlreadyExists(v.status())) {
      return absl::AlreadyExistsError(absl::StrCat("volume '", spec.name, "' given twice"));
    }
    if (!v.ok()) return v.status();
  }
  VolumeSpec source;
  source.name = kFaultSourceVolume;
  source.size = 4096;
  GDR_ASSIGN_OR_RETURN(std::unique_ptr<Volume> fault_source, Volume::Create(source));
  for (uint64_t i = 0; i < source.size; ++i) {
    fault_source->data()[i] = static_cast<std::byte>(i & 0xff);
  }
  store->fault_source_ = std::move(fault_source);
  return store;
}

std::shared_ptr<const Volume> Store::Find(absl::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = volumes_.find(name);
  return it == volumes_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const Volume>> Store::Volumes() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::shared_ptr<const Volume>> out;
  out.reserve(volumes_.size());
  for (const auto& [name, v] : volumes_) out.push_back(v);
  return out;
}

uint64_t Store::AddPreparer(Preparer p) const {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_preparer_++;
  preparers_.emplace(id, std::move(p));
  return id;
}

void Store::RemovePreparer(uint64_t id) const {
  absl::MutexLock lock(&mu_);
  preparers_.erase(id);
}

absl::StatusOr<std::shared_ptr<const Volume>> Store::Add(const VolumeSpec& spec) {
  std::vector<Preparer> preparers;
  {
    absl::MutexLock lock(&mu_);
    if (volumes_.count(spec.name) != 0 ||
        std::find(adding_.begin(), adding_.end(), spec.name) != adding_.end()) {
      return absl::AlreadyExistsError(absl::StrCat("volume '", spec.name, "' exists"));
    }
    adding_.push_back(spec.name);
    for (const auto& [id, p] : preparers_) preparers.push_back(p);
  }
  auto done_adding = absl::MakeCleanup([this, &spec] {
    absl::MutexLock lock(&mu_);
    adding_.erase(std::find(adding_.begin(), adding_.end(), spec.name));
  });
  // Mapped and filled outside the lock: finds and ops on other volumes go on meanwhile.
  GDR_ASSIGN_OR_RETURN(std::unique_ptr<Volume> made, Volume::Create(spec));
  std::shared_ptr<const Volume> volume(std::move(made));
  for (const Preparer& p : preparers) GDR_RETURN_IF_ERROR(p(*volume));
  absl::MutexLock lock(&mu_);
  volumes_.emplace(spec.name, volume);
  return volume;
}

absl::StatusOr<std::shared_ptr<const Volume>> Store::Remove(absl::string_view name) {
  absl::MutexLock lock(&mu_);
  auto it = volumes_.find(name);
  if (it == volumes_.end()) {
    return absl::NotFoundError(absl::StrCat("volume '", name, "' does not exist"));
  }
  std::shared_ptr<const Volume> gone = std::move(it->second);
  volumes_.erase(it);
  return gone;
}

}  // namespace gdr
