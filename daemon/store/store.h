// The daemon's simulated store: named volumes of bytes, memory-backed, each filled at start with
// the deterministic pattern (common/base/pattern.h) so clients can verify what they read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/socket.h"
#include "daemon/store/media_settings.h"

namespace gdr {

struct VolumeSpec {
  std::string name;
  uint64_t size = 0;
  std::string file;         // empty: memory-backed; else an absolute path, mmap'ed shared
  MediaSettings media;      // the simulated device; off by default
};

// "NAME=SIZE[,file=/abs/path][,media=PRESET][,latency_us=N][,p99_us=N][,bandwidth=SIZE/s]
// [,read_bandwidth=SIZE/s][,write_bandwidth=SIZE/s][,iops=N][,read_iops=N][,write_iops=N]
// [,queue_depth=N][,seed=N]" (SIZE as in ParseSize). A preset applies first wherever it is
// written; the other media options override its figures.
// INVALID_ARGUMENT on a bad name (1..64 of [A-Za-z0-9_.-]), size (0 or unparsable), a relative
// file path, an unknown or repeated option, a bad media value (naming the option).
absl::StatusOr<VolumeSpec> ParseVolumeSpec(absl::string_view text);
bool IsValidVolumeName(absl::string_view name);
// The fault source's name: not a valid volume name, so no request reaches it.
inline constexpr char kFaultSourceVolume[] = "@fault-source";

// One volume; owns its mapping. Immutable shape after creation; bytes are written concurrently
// by transfers (last writer wins for overlapping ops, as on a real block device).
// A file-backed volume maps its file MAP_SHARED: bytes a transfer stores are in the file's page
// cache pages the moment the transfer completes, so they survive a daemon crash; Sync() makes a
// range durable across a host crash.
class Volume {
 public:
  // Memory: anonymous mapping filled with the pattern. File: an existing file of exactly the
  // spec's size is kept as it is; a missing one is created as FILE.partial, pattern-filled,
  // flushed and renamed into place (a crash mid-fill never leaves a half-filled FILE).
  // RESOURCE_EXHAUSTED when memory cannot be mapped; FAILED_PRECONDITION when FILE exists with
  // another size; the errno status (with the path) when the file cannot be opened or mapped.
  static absl::StatusOr<std::unique_ptr<Volume>> Create(const VolumeSpec& spec);
  ~Volume();
  Volume(const Volume&) = delete;
  Volume& operator=(const Volume&) = delete;

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }
  std::byte* data() const { return data_; }
  const std::string& file() const { return file_; }  // empty for memory volumes
  bool created() const { return created_; }           // file volumes: made (and filled) now
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

 private:
  Volume(std::string name, uint64_t size, std::byte* data, std::string file, bool created,
         ScopedFd fd);
  std::string name_;
  uint64_t size_;
  std::byte* data_;
  std::string file_;
  bool created_ = false;
  ScopedFd fd_;  // file volumes: the mapped file, kept open for CheckBacked
};

// All volumes of the daemon. Lookups are thread-safe (the set is fixed after Create).
class Store {
 public:
  // ALREADY_EXISTS on a repeated name, RESOURCE_EXHAUSTED when memory cannot be mapped.
  static absl::StatusOr<std::unique_ptr<Store>> Create(const std::vector<VolumeSpec>& specs);

  // nullptr when absent. Never finds the fault source.
  const Volume* Find(absl::string_view name) const;
  // 4 KiB holding every byte value at its own offset (byte i = i mod 256), registered with the
  // transports like a volume but named so no request can name it (kFaultSourceVolume): where a
  // corrupt fault's one wrong byte is sent from.
  const Volume& fault_source() const { return *fault_source_; }
  const std::map<std::string, std::unique_ptr<Volume>, std::less<>>& volumes() const {
    return volumes_;
  }

 private:
  Store() = default;
  std::map<std::string, std::unique_ptr<Volume>, std::less<>> volumes_;
  std::unique_ptr<Volume> fault_source_;
};

}  // namespace gdr
