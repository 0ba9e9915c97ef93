// The daemon's simulated store: named volumes of bytes, memory-backed or mapped from files, each
// new one filled with the deterministic pattern (common/base/pattern.h) so clients can verify
// what they read. Volumes come from the configuration and may be added and removed while the
// daemon serves (Admin CreateVolume / DeleteVolume): an op holds its volume, so a removed
// volume's memory, and what transports attached to it, go when its last op is done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/base/socket.h"
#include "common/wire/volume_name.h"
#include "daemon/store/media_settings.h"
#include "daemon/store/served_dir.h"

namespace gdr {

struct VolumeSpec {
  std::string name;
  uint64_t size = 0;
  std::string file;         // empty: memory-backed; else an absolute path, mmap'ed shared
  MediaSettings media;      // the simulated device; off by default
  // Served for gets only (a --volume-dir without `writable`): the file is opened and mapped
  // read-only, and puts are refused.
  bool read_only = false;
  // Set for a file of a --volume-dir: the file is `name` beneath this directory, reached only
  // through its descriptor (served_dir.h), and `file` is the path as a person reads it.
  std::shared_ptr<const ServedDir> dir = nullptr;
  // Memory volumes: 0, or the bytes of memory that back the whole range (`repeat=SIZE`), seen
  // again every `repeat` bytes, so a dataset larger than the host's RAM can be served.
  uint64_t repeat = 0;
};

// At most this many periods in a repeating volume: each is one mapping of the process, and
// vm.max_map_count is 65530 by default.
inline constexpr uint64_t kMaxRepeatPeriods = 16384;

// "NAME=SIZE[,file=/abs/path][,media=PRESET][,latency_us=N][,p99_us=N][,bandwidth=SIZE/s]
// [,read_bandwidth=SIZE/s][,write_bandwidth=SIZE/s][,iops=N][,read_iops=N][,write_iops=N]
// [,queue_depth=N][,seed=N][,repeat=SIZE]" (SIZE as in ParseSize). A preset applies first
// wherever it is written; the other media options override its figures.
// INVALID_ARGUMENT on a bad name (IsValidVolumeName), size (0 or unparsable), a relative
// file path, an unknown or repeated option, a bad media value (naming the option), a repeat
// that is 0, not a multiple of the page size, does not divide the size, recurs more than
// kMaxRepeatPeriods times, or is given with file= (naming repeat).
absl::StatusOr<VolumeSpec> ParseVolumeSpec(absl::string_view text);
// A memory volume `name` of `size` bytes with the options a spec takes after NAME=SIZE but
// file= ("media=hdd,repeat=1GiB", or empty): Admin CreateVolume's `media` field. ParseVolumeSpec's
// errors; INVALID_ARGUMENT for a file= among them.
absl::StatusOr<VolumeSpec> ParseVolumeOptions(absl::string_view name, uint64_t size,
                                              absl::string_view options);
// The media options alone ("media=nvme-gen4,latency_us=80", or empty), checked as in a spec;
// INVALID_ARGUMENT for file= or repeat= among them.
absl::StatusOr<MediaSettings> ParseMediaOptions(absl::string_view volume,
                                                absl::string_view options);
// kVolumeNameRule (common/wire/volume_name.h): a name is also a safe relative path (a
// --volume-dir file).
inline bool IsValidVolumeName(absl::string_view name) { return IsVolumeNameSyntax(name); }
// The fault source's name: not a valid volume name, so no request reaches it.
inline constexpr char kFaultSourceVolume[] = "@fault-source";

// One volume; owns its mapping. Immutable shape after creation; bytes are written concurrently
// by transfers (last writer wins for overlapping ops, as on a real block device).
// A file-backed volume maps its file MAP_SHARED: bytes a transfer stores are in the file's page
// cache pages the moment the transfer completes, so they survive a daemon crash; Sync() makes a
// range durable across a host crash.
class Volume {
 public:
  // What a transport keeps for a volume (a memory region per rail, a CUDA registration) for
  // exactly as long as the volume lives: dropped before its memory is unmapped.
  class Attachment {
   public:
    virtual ~Attachment() = default;
  };

  // Memory: anonymous mapping filled with the pattern; with spec.repeat, a reserved range of
  // spec.size with one memfd of spec.repeat bytes mapped shared at every multiple of it, the
  // first period pattern-filled, so byte o reads as the pattern's byte o mod repeat and a put
  // shows at every offset congruent to it. File: an existing file of exactly the
  // spec's size is kept as it is; a missing one is created under a temporary name ending in
  // ".partial" beside it, pattern-filled, flushed and renamed into place, never over a file
  // that appeared meanwhile (a crash mid-fill never leaves a half-filled FILE). Beneath a
  // --volume-dir (spec.dir) every step goes through directory descriptors, the missing parent
  // directories are made, and those made are removed again when the create fails.
  // RESOURCE_EXHAUSTED when memory cannot be mapped (a repeating volume: its period cannot be
  // allocated, or a mapping fails, as past vm.max_map_count); FAILED_PRECONDITION when FILE
  // exists with another size or is not a regular file, or a part of its path beneath the
  // directory is a symbolic link; the errno status (with the path) when the file cannot be
  // opened or mapped.
  static absl::StatusOr<std::unique_ptr<Volume>> Create(const VolumeSpec& spec);
  ~Volume();
  Volume(const Volume&) = delete;
  Volume& operator=(const Volume&) = delete;

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  std::byte* data() const { return data_; }
  const std::string& file() const { return file_; }  // empty for memory volumes
  uint64_t repeat() const { return repeat_; }         // 0 unless a repeating memory volume
  // What GetInfo shows: "memory", "memory,repeat=BYTES" (the memory it holds), "file:PATH".
  std::string backing() const;
  // The mapped file's descriptor (mapped from offset 0), open as long as the volume; -1 for
  // memory volumes. For reading the bytes without faulting the mapping in (pread).
  int fd() const { return fd_.get(); }
  bool created() const { return created_; }           // file volumes: made (and filled) now
  bool read_only() const { return read_only_; }
  const MediaSettings& media() const { return media_; }
  // Keeps `a` under `owner` until the volume or the owner goes (Detach); replaces one the owner
  // had. Thread-safe, as are the two below.
  void Attach(const void* owner, std::unique_ptr<Attachment> a) const;
  // What `owner` attached, or nullptr. Its own state (a lazy registration) is the owner's to
  // change, hence not const.
  Attachment* AttachmentOf(const void* owner) const;
  // Drops what `owner` attached (an owner going before the volume: its device closes).
  void Detach(const void* owner) const;
  // msync(MS_SYNC) of the pages holding [offset, offset+length). OK at once for memory
  // volumes; the errno status otherwise. Blocks on the disk: never call it on a gRPC thread.
  absl::Status Sync(uint64_t offset, uint64_t length) const;
  // Whether the mapping is still backed: a file volume whose file was truncated behind the
  // daemon's back has pages that raise SIGBUS when touched. OK at once for memory volumes;
  // for file volumes one fstat of the file (the one mapped, even if renamed or unlinked):
  // DATA_LOSS naming the volume, the file and both sizes while the file is shorter than the
  // volume (its ops fail; the rest of the daemon serves on; restoring the size, or the file,
  // serves it again); the errno status when fstat fails. Thread-safe. A truncation racing an
  // op that passed this check is caught where the bytes are copied (mapping_guard.h).
  absl::Status CheckBacked() const;
  // Unlinks the volume's file from its --volume-dir, only while the name there is still this
  // volume's file (same device and inode), never through a link. FAILED_PRECONDITION for a
  // volume not made from a --volume-dir, or when the name now holds another file; OK when the
  // name is already gone; the errno status otherwise.
  absl::Status RemoveFile() const;
  // The --volume-dir the file lies in; nullptr for memory volumes and --volume files.
  const ServedDir* served_dir() const { return dir_.get(); }

 private:
  Volume(const VolumeSpec& spec, std::byte* data, bool created, ScopedFd fd);
  std::string name_;
  uint64_t size_;
  std::byte* data_;
  std::string file_;
  uint64_t repeat_ = 0;
  bool created_ = false;
  bool read_only_ = false;
  MediaSettings media_;
  ScopedFd fd_;  // file volumes: the mapped file, kept open for CheckBacked
  std::shared_ptr<const ServedDir> dir_;
  mutable absl::Mutex attach_mu_;
  mutable std::vector<std::pair<const void*, std::unique_ptr<Attachment>>> attachments_
      ABSL_GUARDED_BY(attach_mu_);
};

// All volumes of the daemon. Thread-safe.
class Store {
 public:
  // ALREADY_EXISTS on a repeated name, RESOURCE_EXHAUSTED when memory cannot be mapped.
  static absl::StatusOr<std::unique_ptr<Store>> Create(const std::vector<VolumeSpec>& specs);

  // nullptr when absent. Never finds the fault source. The volume stays mapped while held.
  std::shared_ptr<const Volume> Find(absl::string_view name) const;
  // Every volume now, by name.
  std::vector<std::shared_ptr<const Volume>> Volumes() const;
  // 4 KiB holding every byte value at its own offset (byte i = i mod 256), registered with the
  // transports like a volume but named so no request can name it (kFaultSourceVolume): where a
  // corrupt fault's one wrong byte is sent from.
  const Volume& fault_source() const { return *fault_source_; }
  const std::shared_ptr<const Volume>& fault_source_held() const { return fault_source_; }

  // Run for every volume added from now on, before it can be found: a transport attaches what
  // it needs (its error fails the Add). Runs on the adding thread. A hook, not the store's
  // contents, so a holder of a const Store (a transport) may register one; it must remove it
  // (by the id returned) before it goes.
  using Preparer = std::function<absl::Status(const Volume&)>;
  uint64_t AddPreparer(Preparer p) const;
  void RemovePreparer(uint64_t id) const;
  // Maps (and for a new file or memory, pattern-fills) `spec` and, once every preparer has
  // accepted it, makes it findable. ALREADY_EXISTS for a name in use (or being added);
  // Volume::Create's errors; a preparer's. Blocks while filling: not on a gRPC callback thread.
  absl::StatusOr<std::shared_ptr<const Volume>> Add(const VolumeSpec& spec);
  // Makes `name` unfindable; its memory goes with the last op holding it. NOT_FOUND when absent.
  absl::StatusOr<std::shared_ptr<const Volume>> Remove(absl::string_view name);

 private:
  Store() = default;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<const Volume>, std::less<>> volumes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> adding_ ABSL_GUARDED_BY(mu_);  // names an Add is filling now
  mutable std::map<uint64_t, Preparer> preparers_ ABSL_GUARDED_BY(mu_);
  mutable uint64_t next_preparer_ ABSL_GUARDED_BY(mu_) = 1;
  std::shared_ptr<const Volume> fault_source_;
};

}  // namespace gdr
