#include "daemon/service/volume_catalog.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "common/base/log.h"
#include "common/base/status_macros.h"
#include "common/base/thread_name.h"
#include "common/base/units.h"

namespace gdr {

namespace v1 = gdrstore::v1;

std::optional<uint64_t> MemAvailable(const std::string& meminfo_text) {
  for (absl::string_view line : absl::StrSplit(meminfo_text, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemAvailable:")) continue;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumeSuffix(&line, "kB")) return std::nullopt;
    uint64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib)) return std::nullopt;
    return kib * 1024;
  }
  return std::nullopt;
}

VolumeCatalog::VolumeCatalog(Store* store, MediaTiming* media, DaemonStats* stats,
                             VolumeCatalogOptions options)
    : store_(store), media_(media), stats_(stats), options_(std::move(options)) {
  worker_ = std::thread([this] { Work(); });
}

VolumeCatalog::~VolumeCatalog() {
  std::deque<std::pair<std::function<void()>, std::function<void()>>> left;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    left.swap(queue_);
  }
  for (auto& [run, abandon] : left) abandon();
  if (worker_.joinable()) worker_.join();
}

void VolumeCatalog::Post(std::function<void()> run, std::function<void()> abandon) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      queue_.emplace_back(std::move(run), std::move(abandon));
      return;
    }
  }
  abandon();
}

void VolumeCatalog::Work() {
  SetThreadName("gdr-volumes");
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !queue_.empty();
  };
  for (;;) {
    std::function<void()> run;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;  // the destructor answers what is queued
      run = std::move(queue_.front().first);
      queue_.pop_front();
    }
    run();
  }
}

void VolumeCatalog::Create(const v1::CreateVolumeRequest& request, std::string who,
                           std::function<void(absl::StatusOr<Made>)> done) {
  auto shared = std::make_shared<std::function<void(absl::StatusOr<Made>)>>(std::move(done));
  Post([this, request, who = std::move(who), shared] { (*shared)(RunCreate(request, who)); },
       [shared] { (*shared)(absl::UnavailableError("the daemon is stopping")); });
}

void VolumeCatalog::Delete(const v1::DeleteVolumeRequest& request, std::string who,
                           std::function<void(absl::Status)> done) {
  auto shared = std::make_shared<std::function<void(absl::Status)>>(std::move(done));
  Post([this, request, who = std::move(who), shared] { (*shared)(RunDelete(request, who)); },
       [shared] { (*shared)(absl::UnavailableError("the daemon is stopping")); });
}

absl::Status VolumeCatalog::RunWaiting(const std::function<void()>& run) {
  absl::Notification ran;
  absl::Status posted = absl::OkStatus();
  Post(
      [&] {
        run();
        ran.Notify();
      },
      [&] {
        posted = absl::UnavailableError("the daemon is stopping");
        ran.Notify();
      });
  ran.WaitForNotification();
  return posted;
}

absl::StatusOr<VolumeCatalog::Made> VolumeCatalog::CreateConfigured(const VolumeSpec& spec,
                                                                    const std::string& who) {
  absl::StatusOr<Made> made = absl::UnknownError("not run");
  GDR_RETURN_IF_ERROR(RunWaiting([&] { made = Make(spec, who); }));
  return made;
}

absl::Status VolumeCatalog::CreateAtStart(const std::vector<VolumeSpec>& specs) {
  absl::Status made = absl::OkStatus();
  GDR_RETURN_IF_ERROR(RunWaiting([&] {
    for (const VolumeSpec& spec : specs) {
      made = Make(spec, "the configuration", /*check_room=*/false).status();
      if (!made.ok()) return;
    }
  }));
  return made;
}

absl::Status VolumeCatalog::DeleteConfigured(const std::string& name, const std::string& who) {
  v1::DeleteVolumeRequest request;
  request.set_name(name);
  request.set_delete_file(false);  // the configuration's files are the operator's
  absl::Status deleted = absl::UnknownError("not run");
  GDR_RETURN_IF_ERROR(RunWaiting([&] { deleted = RunDelete(request, who); }));
  return deleted;
}

absl::StatusOr<VolumeSpec> VolumeCatalog::SpecOf(const v1::CreateVolumeRequest& request) const {
  if (!IsValidVolumeName(request.name())) {
    return absl::InvalidArgumentError(
        absl::StrCat("name '", ShownVolumeName(request.name()), "' must be ", kVolumeNameRule));
  }
  if (request.size() == 0) return absl::InvalidArgumentError("size must be > 0");
  // A mapping the size of the address space's user half cannot be made anywhere.
  if (request.size() > (uint64_t{1} << 47)) {
    return absl::InvalidArgumentError(absl::StrCat("size ", request.size(), " is past 128 TiB"));
  }
  // `media` holds what --volume takes after NAME=SIZE but file=: media options and repeat.
  absl::StatusOr<VolumeSpec> options =
      ParseVolumeOptions(request.name(), request.size(), request.media());
  if (!options.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("media: ", options.status().message()));
  }
  VolumeSpec spec;
  if (request.file()) {
    if (options->repeat != 0) {
      return absl::InvalidArgumentError(
          "media: repeat is for memory volumes; a file volume (file) keeps every byte it serves");
    }
    if (!options_.writable_dir) {
      return absl::FailedPreconditionError(
          "file: this daemon has no writable --volume-dir to make volume files in");
    }
    // Reached only through the directory's descriptor (served_dir.h): the parts of its path
    // are checked, and its directories made, as the file is made, not before.
    GDR_ASSIGN_OR_RETURN(spec,
                         VolumeSpecIn(*options_.writable_dir, request.name(), request.size()));
  } else {
    spec.name = request.name();
    spec.size = request.size();
    spec.repeat = options->repeat;
  }
  spec.media = options->media;
  return spec;
}

absl::Status VolumeCatalog::CheckRoom(const VolumeSpec& spec) const {
  if (store_->Volumes().size() >= options_.max_volumes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the daemon serves --max-volumes ", options_.max_volumes, " volumes"));
  }
  if (spec.file.empty()) {
    std::ifstream f(options_.meminfo);
    std::stringstream text;
    text << f.rdbuf();
    const std::optional<uint64_t> available = MemAvailable(text.str());
    if (!available) {
      return absl::InternalError(absl::StrCat("cannot read MemAvailable from ", options_.meminfo));
    }
    // A repeating volume holds one period of memory, whatever its size.
    const uint64_t held = spec.repeat != 0 ? spec.repeat : spec.size;
    if (held + options_.memory_reserve > *available) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "a memory volume ", spec.repeat != 0 ? "holding " : "of ", FormatSize(held),
          " does not fit: ", FormatSize(*available), " of memory available, ",
          FormatSize(options_.memory_reserve), " kept free"));
    }
    return absl::OkStatus();
  }
  // A file that is there already needs no room: its data is kept.
  std::string where;
  bool exists = false;
  if (spec.dir == nullptr) {
    // The configuration's file=/abs/path.
    struct stat st {};
    exists = ::stat(spec.file.c_str(), &st) == 0;
    const size_t slash = spec.file.rfind('/');
    where = slash == 0 || slash == std::string::npos ? "/" : spec.file.substr(0, slash);
  } else if (options_.writable_dir && spec.dir == options_.writable_dir->handle) {
    exists = VolumeFileExists(*options_.writable_dir, spec.name);
    where = options_.writable_dir->path;
  } else {
    return absl::OkStatus();  // a file a --volume-dir scan found
  }
  if (exists) return absl::OkStatus();
  struct statvfs fs {};
  if (::statvfs(where.c_str(), &fs) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("statvfs ", where));
  }
  const uint64_t free = uint64_t{fs.f_bavail} * fs.f_frsize;
  if (spec.size > free) {
    return absl::ResourceExhaustedError(absl::StrCat("a file volume of ", FormatSize(spec.size),
                                                     " does not fit in ", where, " (",
                                                     FormatSize(free), " free)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<VolumeCatalog::Made> VolumeCatalog::RunCreate(const v1::CreateVolumeRequest& request,
                                                             const std::string& who) {
  GDR_ASSIGN_OR_RETURN(VolumeSpec spec, SpecOf(request));
  return Make(spec, who);
}

absl::StatusOr<VolumeCatalog::Made> VolumeCatalog::Make(const VolumeSpec& spec,
                                                        const std::string& who,
                                                        bool check_room) {
  if (store_->Find(spec.name) != nullptr) {
    return absl::AlreadyExistsError(absl::StrCat("volume '", spec.name, "' exists"));
  }
  if (check_room) GDR_RETURN_IF_ERROR(CheckRoom(spec));
  // Counters and model first: an op may name the volume as soon as the store has it.
  stats_->AddVolume(spec.name);
  media_->Add(spec.name, spec.media);
  absl::StatusOr<std::shared_ptr<const Volume>> v = store_->Add(spec);
  if (!v.ok()) {
    if (!absl::IsAlreadyExists(v.status())) {
      media_->Remove(spec.name);
      stats_->HideVolume(spec.name);
    }
    return v.status();
  }
  GDR_LOG(kInfo) << "volume " << spec.name << ": " << FormatSize(spec.size)
                 << (spec.file.empty() ? absl::StrCat(" (", (*v)->backing(), ")")
                                       : absl::StrCat(" (file ", spec.file,
                                                      (*v)->created() ? ", created and filled)"
                                                                      : ", existing data kept)"))
                 << " made by " << who;
  if (spec.media.enabled()) {
    GDR_LOG(kInfo) << "volume " << spec.name << ": simulated device "
                   << FormatMediaSettings(spec.media);
  }
  if (options_.volumes_changed) options_.volumes_changed();
  return Made{*v, (*v)->created()};
}

absl::Status VolumeCatalog::RunDelete(const v1::DeleteVolumeRequest& request,
                                      const std::string& who) {
  std::shared_ptr<const Volume> v = store_->Find(request.name());
  if (v == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("volume '", ShownVolumeName(request.name()), "' does not exist"));
  }
  if (request.delete_file()) {
    if (v->file().empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("volume '", v->name(), "' is memory-backed: it has no file to delete"));
    }
    const ServedDir* mine = options_.writable_dir ? options_.writable_dir->handle.get() : nullptr;
    if (mine == nullptr || v->served_dir() != mine) {
      return absl::FailedPreconditionError(absl::StrCat(
          "volume '", v->name(), "': its file ", v->file(),
          " is not in the writable --volume-dir; the daemon deletes only files it may make"));
    }
    // The name goes first, through the directory's descriptors and only while it still names
    // the volume's own file: ops in flight keep the mapping, and its pages go with them.
    GDR_RETURN_IF_ERROR(v->RemoveFile());
  }
  GDR_RETURN_IF_ERROR(store_->Remove(request.name()).status());
  media_->Remove(request.name());
  stats_->HideVolume(request.name());
  GDR_LOG(kInfo) << "volume " << v->name() << " deleted by " << who
                 << (request.delete_file() ? ", with its file" : "");
  if (options_.volumes_changed) options_.volumes_changed();
  return absl::OkStatus();
}

}  // namespace gdr
